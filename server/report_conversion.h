// Domain results -> kiln.v1 messages for the Compiler service.
#ifndef KILN_SERVER_REPORT_CONVERSION_H_
#define KILN_SERVER_REPORT_CONVERSION_H_

#include "engine/kernel_cache.h"
#include "engine/model_manager.h"
#include "proto/kiln_service.pb.h"

namespace kiln::server {

void FillCompileReport(const engine::CompileResult& result, kiln::v1::CompileReport* report);
void FillPassTimings(const CompileRecord& record,
                     google::protobuf::RepeatedPtrField<kiln::v1::PassTiming>* out);
void FillCacheStats(const engine::CacheStats& stats, kiln::v1::GetCacheStatsResponse* out);
void FillLoadedMemory(const engine::ModelMemory& memory, kiln::v1::LoadedMemory* out);
void FillModelTiming(const engine::ServedModel& served, kiln::v1::ModelTiming* out);
// A kernel's roofline at `seconds` per call on `threads` threads, against the
// host's peaks (measured at the first call in this process).
void FillKernelRoofline(const engine::KernelInfo& kernel, double seconds, int threads,
                        kiln::v1::KernelRoofline* out);
void FillKernelTiming(const std::string& name, const runtime::DurationSnapshot& d,
                      kiln::v1::KernelTiming* out);
// A DType as kiln.v1's DataType (the inverse of the Kiln graph importer's).
kiln::v1::DataType WireDataType(DType dtype);

void FillValueInfo(const TensorSignature& value, kiln::v1::ValueInfo* out);
void FillValueInfo(const ValueSpec& value, kiln::v1::ValueInfo* out);

}  // namespace kiln::server

#endif  // KILN_SERVER_REPORT_CONVERSION_H_
