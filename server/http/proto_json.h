// A protobuf message as the JSON Triton's HTTP server answers for it (the
// /config and /stats routes): proto field names, 64-bit integers as JSON
// numbers (protobuf's own JSON mapping writes them as strings, which
// Triton's clients do not expect), enums by name, maps as objects, every
// scalar field even at its default, unset message fields left out.
#ifndef KILN_SERVER_HTTP_PROTO_JSON_H_
#define KILN_SERVER_HTTP_PROTO_JSON_H_

#include <string>

#include "google/protobuf/message.h"

namespace kiln::server {

std::string ProtoToJson(const google::protobuf::Message& message);

}  // namespace kiln::server

#endif  // KILN_SERVER_HTTP_PROTO_JSON_H_
