// Suggestions for misspelt names (flags, commands, model inputs): the known
// name closest by edit distance, when it is close enough to be a typo.
#ifndef KILN_CLIENT_DID_YOU_MEAN_H_
#define KILN_CLIENT_DID_YOU_MEAN_H_

#include <string>
#include <vector>

namespace kiln::client {

// The candidate closest to `word` by Levenshtein distance when it is within
// 1 edit (words of up to 3 characters) or max(2, |word| / 3), and not every
// character replaced; else "". Ties go to the earlier candidate.
std::string ClosestMatch(const std::string& word, const std::vector<std::string>& candidates);

// " (did you mean 'PREFIXmatch'?)" for ClosestMatch's answer, "" without one.
std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates,
                       const std::string& prefix = "");

}  // namespace kiln::client

#endif  // KILN_CLIENT_DID_YOU_MEAN_H_
