#include "server/http/proto_json.h"

#include "google/protobuf/descriptor.h"
#include "nlohmann/json.hpp"

namespace kiln::server {
namespace {

using Json = nlohmann::json;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

Json ToJson(const Message& message);

// Element `index` of a repeated field, or the singular field when index < 0.
Json FieldValue(const Message& m, const FieldDescriptor* f, int index) {
  const Reflection* r = m.GetReflection();
  const bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f);
    case FieldDescriptor::CPPTYPE_INT64:
      return rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f);
    case FieldDescriptor::CPPTYPE_UINT32:
      return rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f);
    case FieldDescriptor::CPPTYPE_UINT64:
      return rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f);
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f);
    case FieldDescriptor::CPPTYPE_FLOAT:
      return rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f);
    case FieldDescriptor::CPPTYPE_BOOL:
      return rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return (rep ? r->GetRepeatedEnum(m, f, index) : r->GetEnum(m, f))->name();
    case FieldDescriptor::CPPTYPE_STRING:
      return rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
    case FieldDescriptor::CPPTYPE_MESSAGE:
      return ToJson(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f));
  }
  return nullptr;
}

Json ToJson(const Message& message) {
  Json out = Json::object();
  const Reflection* r = message.GetReflection();
  const google::protobuf::Descriptor* d = message.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_map()) {
      Json map = Json::object();
      const FieldDescriptor* key = f->message_type()->map_key();
      const FieldDescriptor* value = f->message_type()->map_value();
      for (int j = 0; j < r->FieldSize(message, f); ++j) {
        const Message& entry = r->GetRepeatedMessage(message, f, j);
        Json k = FieldValue(entry, key, -1);
        map[k.is_string() ? k.get<std::string>() : k.dump()] = FieldValue(entry, value, -1);
      }
      out[f->name()] = std::move(map);
    } else if (f->is_repeated()) {
      Json list = Json::array();
      for (int j = 0; j < r->FieldSize(message, f); ++j) list.push_back(FieldValue(message, f, j));
      out[f->name()] = std::move(list);
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE || f->containing_oneof()) {
      if (r->HasField(message, f)) out[f->name()] = FieldValue(message, f, -1);
    } else {
      out[f->name()] = FieldValue(message, f, -1);
    }
  }
  return out;
}

}  // namespace

std::string ProtoToJson(const google::protobuf::Message& message) {
  return ToJson(message).dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace kiln::server
