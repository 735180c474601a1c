// Replays a fuzz target's corpus as an ordinary test (no libFuzzer needed): every file named on
// the command line, or every file in a directory named there, goes through
// LLVMFuzzerTestOneInput once. A property violation aborts, which fails the ctest entry.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
/// Defined by targets that hold state across inputs (an actor system); called before exit.
extern "C" __attribute__((weak)) void laneq_fuzz_teardown();

namespace {

void run_file(const std::filesystem::path& p) {
  std::ifstream in{p, std::ios::binary};
  std::vector<char> bytes{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t n = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path arg{argv[i]};
    if (std::filesystem::is_directory(arg)) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::directory_iterator{arg})
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        run_file(f);
        ++n;
      }
    } else {
      run_file(arg);
      ++n;
    }
  }
  if (laneq_fuzz_teardown) laneq_fuzz_teardown();
  std::printf("replayed %zu inputs\n", n);
  if (n == 0) {
    std::fprintf(stderr, "no inputs: name corpus files or directories\n");
    return 1;
  }
  return 0;
}
