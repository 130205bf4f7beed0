// Kiln's inference protocol stays wire-compatible with Triton's: every field,
// enum value and RPC of proto/grpc_service.proto and proto/model_config.proto
// is one Triton has, with the same name, number, type, label and oneof
// (data/triton_wire.txt lists Triton's). A field Kiln adds, renumbers or
// retypes fails here before a Triton client meets it.
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "proto/grpc_service.pb.h"
#include "proto/model_config.pb.h"

namespace kiln {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::EnumDescriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;

std::set<std::string> TritonFacts() {
  std::ifstream in("tests/proto/data/triton_wire.txt");
  std::set<std::string> facts;
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] != '#') facts.insert(line);
  }
  return facts;
}

void AddEnum(const EnumDescriptor* e, std::vector<std::string>* out) {
  for (int i = 0; i < e->value_count(); ++i) {
    out->push_back(absl::StrCat("enum ", e->full_name(), ".", e->value(i)->name(), " ",
                                e->value(i)->number()));
  }
}

void AddMessage(const Descriptor* m, std::vector<std::string>* out) {
  for (int i = 0; i < m->field_count(); ++i) {
    const FieldDescriptor* f = m->field(i);
    std::string type_name = "-";
    if (f->message_type() != nullptr) type_name = f->message_type()->full_name();
    if (f->enum_type() != nullptr) type_name = f->enum_type()->full_name();
    const auto* oneof = f->real_containing_oneof();
    out->push_back(absl::StrCat("field ", f->full_name(), " ", f->number(), " ", f->type_name(),
                                " ", (f->is_repeated() ? "repeated" : "optional"), " ", type_name,
                                " ", oneof != nullptr ? oneof->name() : "-"));
  }
  for (int i = 0; i < m->nested_type_count(); ++i) AddMessage(m->nested_type(i), out);
  for (int i = 0; i < m->enum_type_count(); ++i) AddEnum(m->enum_type(i), out);
}

// Kiln's facts, in the table's format.
std::vector<std::string> KilnFacts(const FileDescriptor* file) {
  std::vector<std::string> out;
  for (int i = 0; i < file->message_type_count(); ++i) AddMessage(file->message_type(i), &out);
  for (int i = 0; i < file->enum_type_count(); ++i) AddEnum(file->enum_type(i), &out);
  for (int s = 0; s < file->service_count(); ++s) {
    for (int i = 0; i < file->service(s)->method_count(); ++i) {
      const auto* m = file->service(s)->method(i);
      out.push_back(absl::StrCat("rpc ", m->full_name(), " ", m->input_type()->full_name(), " ",
                                 m->output_type()->full_name(),
                                 m->client_streaming() ? " client_streaming" : "",
                                 m->server_streaming() ? " server_streaming" : ""));
    }
  }
  return out;
}

TEST(TritonWireTest, EveryFieldEnumValueAndRpcIsTritons) {
  const std::set<std::string> triton = TritonFacts();
  ASSERT_GT(triton.size(), 150u) << "tests/proto/data/triton_wire.txt not read";
  int checked = 0;
  for (const FileDescriptor* file : {inference::ModelInferRequest::descriptor()->file(),
                                     inference::ModelConfig::descriptor()->file()}) {
    SCOPED_TRACE(file->name());
    EXPECT_EQ(file->package(), "inference");
    for (const std::string& fact : KilnFacts(file)) {
      EXPECT_TRUE(triton.count(fact)) << "not Triton's: " << fact;
      ++checked;
    }
  }
  EXPECT_GT(checked, 150);
}

// The other way: what a Triton client sends or expects in the messages
// Kiln answers must all be there (only ModelConfig's and ModelStatistics'
// fields Kiln never fills may be missing).
TEST(TritonWireTest, SharedRequestAndResponseMessagesHaveAllOfTritonsFields) {
  std::set<std::string> kiln;
  for (const FileDescriptor* file : {inference::ModelInferRequest::descriptor()->file(),
                                     inference::ModelConfig::descriptor()->file()}) {
    for (const std::string& fact : KilnFacts(file)) kiln.insert(fact);
  }
  // The ModelConfig messages Kiln fills in part, and ModelStatistics'
  // memory_usage and response_stats.
  const std::vector<std::string> partial = {
      "field inference.ModelConfig.", "field inference.ModelInput.", "field inference.ModelOutput.",
      "field inference.ModelDynamicBatching.", "field inference.ModelStatistics."};
  std::vector<std::string> missing;
  for (const std::string& fact : TritonFacts()) {
    if (kiln.count(fact)) continue;
    bool allowed = false;
    for (const std::string& p : partial) allowed |= fact.rfind(p, 0) == 0;
    if (!allowed) missing.push_back(fact);
  }
  EXPECT_TRUE(missing.empty()) << absl::StrJoin(missing, "\n");
}

}  // namespace
}  // namespace kiln
