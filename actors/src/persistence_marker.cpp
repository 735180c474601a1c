// LANEQ-COMMITTED and the checks made before and after opening the store
// (actors/include/laneq/actors/persistence_marker.hpp).
#include "laneq/actors/persistence_marker.hpp"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include <rocksdb/file_system.h>

#include "laneq/codec.hpp"

namespace laneq::store_marker {

namespace {

constexpr const char* tag = "laneq-committed 1 ";

std::string body(std::uint64_t seq) {
  return tag + std::to_string(seq);
}

std::string encode(std::uint64_t seq) {
  char crc[16];
  std::snprintf(crc, sizeof crc, " %08x\n", codec::crc32c(body(seq)));
  return body(seq) + crc;
}

std::optional<std::uint64_t> decode(const std::string& text) {
  std::uint64_t seq = 0;
  unsigned crc = 0;
  int used = 0;
  if (text.rfind(tag, 0) != 0) return std::nullopt;
  if (std::sscanf(text.c_str() + std::string(tag).size(), "%lu %x\n%n", &seq, &crc, &used) != 2)
    return std::nullopt;
  if (codec::crc32c(body(seq)) != crc || encode(seq) != text) return std::nullopt;
  return seq;
}

std::string path(const std::string& dir) {
  return dir + "/" + file_name;
}

}  // namespace

rocksdb::Status inspect_dir(rocksdb::Env& env, const std::string& dir, dir_state& state) {
  std::vector<std::string> names;
  state = dir_state::empty;
  if (auto s = env.GetChildren(dir, &names); s.IsNotFound() || s.IsPathNotFound()) {
    return rocksdb::Status::OK();
  } else if (!s.ok()) {
    return s;
  }
  names.erase(std::remove_if(names.begin(), names.end(),
                             [](const std::string& n) { return n == "." || n == ".."; }),
              names.end());
  if (names.empty()) return rocksdb::Status::OK();
  if (std::find(names.begin(), names.end(), "CURRENT") != names.end()) {
    state = dir_state::store;
    return rocksdb::Status::OK();
  }
  std::sort(names.begin(), names.end());
  std::string listed;
  for (std::size_t i = 0; i < names.size() && i < 8; ++i) listed += (i ? ", " : "") + names[i];
  if (names.size() > 8) listed += ", ... (" + std::to_string(names.size()) + " files)";
  return rocksdb::Status::InvalidArgument(
      "the data directory " + dir + " is not empty but has no CURRENT file (" + listed +
      "): it is a damaged store or not a store, and a new one is not created over it; restore "
      "the missing file from a backup, or start on an empty directory");
}

rocksdb::Status read(rocksdb::Env& env, const std::string& dir, std::optional<std::uint64_t>& seq) {
  seq.reset();
  std::string text;
  auto s = rocksdb::ReadFileToString(&env, path(dir), &text);
  if (s.IsNotFound() || s.IsPathNotFound()) return rocksdb::Status::OK();
  if (!s.ok()) return s;
  seq = decode(text);
  if (!seq) return rocksdb::Status::Corruption(path(dir) + " is damaged (bad format or checksum)");
  return rocksdb::Status::OK();
}

rocksdb::Status write(rocksdb::Env& env, const std::string& dir, std::uint64_t seq) {
  auto tmp = path(dir) + ".tmp";
  auto fs = env.GetFileSystem();
  {
    std::unique_ptr<rocksdb::FSWritableFile> file;
    rocksdb::IOOptions io;
    if (auto s = fs->NewWritableFile(tmp, rocksdb::FileOptions{}, &file, nullptr); !s.ok())
      return s;
    if (auto s = file->Append(encode(seq), io, nullptr); !s.ok()) return s;
    if (auto s = file->Sync(io, nullptr); !s.ok()) return s;
    if (auto s = file->Close(io, nullptr); !s.ok()) return s;
  }
  if (auto s = fs->RenameFile(tmp, path(dir), rocksdb::IOOptions{}, nullptr); !s.ok()) return s;
  std::unique_ptr<rocksdb::FSDirectory> d;
  if (auto s = fs->NewDirectory(dir, rocksdb::IOOptions{}, &d, nullptr); !s.ok()) return s;
  return d->Fsync(rocksdb::IOOptions{}, nullptr);
}

rocksdb::Status check_complete(const std::string& dir, std::uint64_t store_seq,
                               std::uint64_t marked_seq) {
  if (store_seq >= marked_seq) return rocksdb::Status::OK();
  return rocksdb::Status::Corruption(
      "acknowledged writes are missing from the store in " + dir + ": " + file_name +
      " records writes up to sequence " + std::to_string(marked_seq) +
      " as committed, but the store ends at sequence " + std::to_string(store_seq) +
      "; a WAL file (*.log) or the MANIFEST was deleted or truncated. Restore the directory "
      "from a backup (laneq backup), or move it away to start empty");
}

}  // namespace laneq::store_marker
