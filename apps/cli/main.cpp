// laneq: the command line of the laneq message queue; talks to laneqd over HTTP (cli.hpp).
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "cli.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  std::map<std::string, std::string> env;
  for (const char* name : {"LANEQ_URL", "LANEQ_TOKEN", "LANEQ_CACERT"})
    if (const char* v = std::getenv(name)) env[name] = v;
  return laneq::cli::run(args, env, std::cout, std::cerr, std::cin);
}
