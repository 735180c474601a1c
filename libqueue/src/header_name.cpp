// Header names (libqueue/include/laneq/header_name.hpp).
#include "laneq/header_name.hpp"

namespace laneq {

namespace {
bool is_token_char(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view{"!#$%&'*+-.^_`|~"}.find(c) != std::string_view::npos;
}
}  // namespace

bool is_header_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name)
    if (!is_token_char(c)) return false;
  return true;
}

}  // namespace laneq
