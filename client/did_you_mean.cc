#include "client/did_you_mean.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kiln::client {
namespace {

size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string ClosestMatch(const std::string& word, const std::vector<std::string>& candidates) {
  // One edit in a short word; in longer ones a transposition (2) or a third.
  const size_t allowed = word.size() <= 3 ? 1 : std::max<size_t>(2, word.size() / 3);
  std::string best;
  size_t best_distance = allowed + 1;
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(word, c);
    if (d < best_distance && d < word.size()) {
      best = c;
      best_distance = d;
    }
  }
  return best;
}

std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates,
                       const std::string& prefix) {
  const std::string match = ClosestMatch(word, candidates);
  return match.empty() ? "" : absl::StrCat(" (did you mean '", prefix, match, "'?)");
}

}  // namespace kiln::client
