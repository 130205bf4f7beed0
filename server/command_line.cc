#include "server/command_line.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace kiln::server {
namespace {

constexpr int kMaxFlagFileDepth = 8;

// --some-flag=x-y -> --some_flag=x-y: only the name changes.
std::string Normalized(std::string word) {
  if (!absl::StartsWith(word, "--")) return word;
  const size_t end = std::min(word.find('='), word.size());
  for (size_t i = 2; i < end; ++i) {
    if (word[i] == '-') word[i] = '_';
  }
  return word;
}

absl::Status Expand(const std::vector<std::string>& words, int depth,
                    std::vector<std::string>* out);

absl::Status ExpandFile(const std::string& path, int depth, std::vector<std::string>* out) {
  if (depth > kMaxFlagFileDepth) {
    return absl::InvalidArgumentError(
        absl::StrCat("--flagfile ", path, ": flag files nested more than ", kMaxFlagFileDepth,
                     " deep (one includes itself?)"));
  }
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--flagfile ", path, ": cannot read"));
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view flag = absl::StripAsciiWhitespace(line);
    if (flag.empty() || flag[0] == '#') continue;
    lines.emplace_back(flag);
  }
  return Expand(lines, depth + 1, out);
}

absl::Status Expand(const std::vector<std::string>& words, int depth,
                    std::vector<std::string>* out) {
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string word = Normalized(words[i]);
    std::string files;
    if (absl::StartsWith(word, "--flagfile=")) {
      files = word.substr(std::string("--flagfile=").size());
    } else if (word == "--flagfile" && i + 1 < words.size()) {
      files = words[++i];
    } else {
      out->push_back(word);
      continue;
    }
    for (absl::string_view file : absl::StrSplit(files, ',', absl::SkipEmpty())) {
      if (absl::Status s = ExpandFile(std::string(file), depth, out); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

// Abseil keeps only a flag's last value; Triton's --load-model repeats, so
// its occurrences are joined into one comma-separated value (kept in place
// of the first).
std::vector<std::string> JoinRepeated(const std::vector<std::string>& words,
                                      const std::string& flag) {
  const std::string with_value = "--" + flag + "=";
  std::vector<std::string> out, values;
  size_t first = std::string::npos;
  for (size_t i = 0; i < words.size(); ++i) {
    std::string value;
    if (absl::StartsWith(words[i], with_value)) {
      value = words[i].substr(with_value.size());
    } else if (words[i] == "--" + flag && i + 1 < words.size()) {
      value = words[++i];
    } else {
      out.push_back(words[i]);
      continue;
    }
    if (first == std::string::npos) {
      first = out.size();
      out.push_back("");
    }
    values.push_back(value);
  }
  if (first != std::string::npos) out[first] = with_value + absl::StrJoin(values, ",");
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandCommandLine(const std::vector<std::string>& words) {
  std::vector<std::string> out;
  if (words.empty()) return out;
  out.push_back(words[0]);
  std::vector<std::string> rest(words.begin() + 1, words.end());
  if (absl::Status s = Expand(rest, 0, &out); !s.ok()) return s;
  return JoinRepeated(out, "load_model");
}

bool IsServerFlagFile(absl::string_view file) { return absl::StrContains(file, "server/"); }

}  // namespace kiln::server
