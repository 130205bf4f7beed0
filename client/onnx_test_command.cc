#include "client/onnx_test_command.h"

#include <iostream>
#include <map>

#include "absl/strings/match.h"
#include "client/json_output.h"
#include "client/onnx_conformance.h"
#include "client/report_format.h"
#include "google/protobuf/struct.pb.h"

namespace kiln::client {

std::string UnsupportedCategory(absl::string_view reason) {
  auto has = [&](absl::string_view s) { return absl::StrContains(reason, s); };
  if (has("unsupported ONNX operator") || has("operator domain")) return "operator";
  if (has("element type") || has("STRING") || has("complex")) return "dtype";
  if (has("opset") && has("is not supported (")) return "opset";
  if (has("decides a shape") || has("decide") || has("must be a constant") ||
      has("must be constants") || has("must be a float constant")) {
    return "value-dependent shape";
  }
  if (has("training") || has("output_mean")) return "training";
  if (has("zero-size")) return "zero-size tensor";
  if (has("is not a tensor")) return "sequence or optional";
  if (has("data contradicts")) return "test data";
  return "attribute";
}

int OnnxTestCommand(KilnClient& client, const CliArgs& args) {
  const bool json = args.Has("json");
  int passed = 0, failed = 0, unsupported = 0;
  std::map<std::string, int> by_category;
  google::protobuf::Struct report;
  google::protobuf::ListValue* cases = (*report.mutable_fields())["cases"].mutable_list_value();
  for (size_t i = 1; i < args.positional.size(); ++i) {
    const std::string& dir = args.positional[i];
    OnnxCaseResult r = RunOnnxCase(
        client, dir, args.Has("model-tolerance") ? Tolerance::kModel : Tolerance::kOnnxRunner);
    std::string category;
    if (r.outcome == OnnxCaseResult::Outcome::kUnsupported) {
      category = UnsupportedCategory(r.detail);
      ++by_category[category];
    }
    (r.outcome == OnnxCaseResult::Outcome::kPass   ? passed
     : r.outcome == OnnxCaseResult::Outcome::kFail ? failed
                                                   : unsupported)++;
    if (json) {
      auto& fields = *cases->add_values()->mutable_struct_value()->mutable_fields();
      fields["case"].set_string_value(dir);
      fields["outcome"].set_string_value(OutcomeName(r.outcome));
      if (!category.empty()) fields["category"].set_string_value(category);
      if (!r.detail.empty()) fields["detail"].set_string_value(r.detail);
      continue;
    }
    std::cout << OutcomeName(r.outcome) << " " << dir;
    if (!category.empty()) std::cout << "  [" << category << "]";
    if (!r.detail.empty()) std::cout << "  (" << r.detail << ")";
    std::cout << "\n";
  }
  if (json) {
    auto& fields = *report.mutable_fields();
    fields["passed"].set_number_value(passed);
    fields["failed"].set_number_value(failed);
    fields["unsupported"].set_number_value(unsupported);
    auto& tally = *fields["unsupported_by_category"].mutable_struct_value()->mutable_fields();
    for (const auto& [category, count] : by_category) tally[category].set_number_value(count);
    std::cout << JsonDocument(report) << "\n";
  } else {
    for (const auto& [category, count] : by_category) {
      std::cout << "unsupported [" << category << "]: " << count << "\n";
    }
    std::cout << passed << " passed, " << failed << " failed, " << unsupported
              << " unsupported\n";
  }
  return failed > 0 ? 1 : 0;
}

}  // namespace kiln::client
