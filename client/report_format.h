// Human-readable tables for the CLI, from the services' messages.
#ifndef KILN_CLIENT_REPORT_FORMAT_H_
#define KILN_CLIENT_REPORT_FORMAT_H_

#include <string>

#include "client/kiln_client.h"
#include "proto/kiln_service.pb.h"

namespace kiln::client {

std::string FormatCompileReport(const kiln::v1::CompileModelResponse& response);
std::string FormatCacheStats(const kiln::v1::GetCacheStatsResponse& stats);
std::string FormatTimingStats(const kiln::v1::GetTimingStatsResponse& stats);
std::string FormatModels(const kiln::v1::ListModelsResponse& models);
std::string FormatKernels(const kiln::v1::ListKernelsResponse& kernels);
std::string FormatBenchmark(const kiln::v1::BenchmarkKernelResponse& bench);
std::string FormatServerInfo(const kiln::v1::GetServerInfoResponse& info);
// Outputs (name, datatype, shape, leading values) and, with a profile, kernel times.
std::string FormatInferResult(const InferResult& result);
// Any message as JSON with proto field names and default values shown.
std::string ToJson(const google::protobuf::Message& message);

}  // namespace kiln::client

#endif  // KILN_CLIENT_REPORT_FORMAT_H_
