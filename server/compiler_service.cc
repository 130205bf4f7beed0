#include "server/compiler_service.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <tuple>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

#include "absl/hash/hash.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/kernel_abi.h"
#include "common/sha256.h"
#include "common/version.h"
#include "compiler/codegen/codegen.h"
#include "compiler/driver/output_dims.h"
#include "compiler/frontend/kiln_graph_importer.h"
#include "compiler/frontend/onnx_importer.h"
#include "compiler/ops/op_registry.h"
#include "engine/tuner.h"
#include "runtime/kernel_call.h"
#include "runtime/thread_pool.h"
#include "runtime/time_evaluator.h"
#include "server/call_auth.h"
#include "server/cpu_affinity.h"
#include "server/infer_request.h"
#include "server/kserve_datatype.h"
#include "server/model_repository.h"
#include "server/report_conversion.h"
#include "server/status_conversion.h"

namespace kiln::server {
namespace {

absl::StatusOr<CompileOptions> ToCompileOptions(const kiln::v1::CompileOptions& in) {
  CompileOptions out;
  switch (in.nchwc_layout()) {
    case kiln::v1::NCHWC_LAYOUT_AUTO:
      out.nchwc_layout = NchwcLayout::kAuto;
      break;
    case kiln::v1::NCHWC_LAYOUT_OFF:
      out.nchwc_layout = NchwcLayout::kOff;
      break;
    case kiln::v1::NCHWC_LAYOUT_ON:
      out.nchwc_layout = NchwcLayout::kOn;
      break;
    default:  // a value this server's proto does not know
      return absl::InvalidArgumentError(
          absl::StrCat("options.nchwc_layout ", in.nchwc_layout(), " is not AUTO, OFF or ON"));
  }
  if (in.has_opt_level()) out.opt_level = in.opt_level();
  out.disabled_passes.assign(in.disabled_passes().begin(), in.disabled_passes().end());
  out.required_passes.assign(in.required_passes().begin(), in.required_passes().end());
  if (in.max_fuse_depth() != 0) out.max_fuse_depth = in.max_fuse_depth();
  out.print_ir_after.assign(in.print_ir_after().begin(), in.print_ir_after().end());
  out.kernel_bounds_checks = in.kernel_bounds_checks();
  if (in.has_winograd_tile()) out.winograd_tile = in.winograd_tile();
  return out;
}

// Model names end up in logs, metrics, file names and (for Triton's
// clients) URLs: 1..128 characters of letters, digits, '_', '-' and '.', not
// starting with '.'. Newlines, NULs, "../x" and RTL overrides were accepted.
absl::Status ValidateModelName(const std::string& name) {
  constexpr size_t kMaxModelName = 128;
  bool ok = !name.empty() && name.size() <= kMaxModelName && name[0] != '.';
  for (char c : name) {
    ok &= absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "model name of ", name.size(), " bytes is not 1..", kMaxModelName,
      " letters, digits, '_', '-' or '.' (not starting with '.')"));
}

// What the model was made from (its bytes and options; not its name,
// version or `replace`): the same model sent again has the same fingerprint.
uint64_t Fingerprint(const kiln::v1::CompileModelRequest& request) {
  std::string options;
  {
    google::protobuf::io::StringOutputStream stream(&options);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);  // options hold maps
    request.options().SerializeToCodedStream(&coded);
  }
  std::string graph;
  if (request.has_graph()) request.graph().SerializeToString(&graph);
  return absl::Hash<std::tuple<absl::string_view, std::string, std::string>>{}(
      {request.onnx_model(), graph, options});
}

// Failures that say something about the model, remembered for the calls
// that look for it; not a deadline, a cancellation or a busy server.
bool IsTheModelsFault(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kAlreadyExists:
      return false;
    case absl::StatusCode::kResourceExhausted:
      return status.GetPayload(kLimitPayload).has_value();  // the model's size
    default:
      return true;
  }
}

// Whether the call's client has gone or its deadline passed: a compile
// nobody waits for stops at its next check.
std::function<bool()> StopCheck(grpc::ServerContext* context) {
  const absl::Time deadline = absl::FromChrono(context->deadline());
  return [context, deadline] { return context->IsCancelled() || absl::Now() > deadline; };
}

// A server limit's error names the flag that sets it.
absl::Status NameTheFlag(absl::Status status) {
  auto limit = status.GetPayload(kLimitPayload);
  if (!limit) return status;
  std::string flag = std::string(*limit);
  std::replace(flag.begin(), flag.end(), '_', '-');
  absl::Status named(status.code(), absl::StrCat(status.message(), " (--", flag, ")"));
  status.ForEachPayload(
      [&](absl::string_view key, const absl::Cord& value) { named.SetPayload(key, value); });
  return named;
}

// The request's shape options (signature and import left to the caller).
engine::SymbolicModel ToSymbolicModel(const kiln::v1::CompileOptions& in) {
  engine::SymbolicModel out;
  const kiln::v1::DynamicBatching& batching = in.dynamic_batching();
  out.batching.max_batch_size = batching.max_batch_size();
  out.batching.preferred_batch_sizes.assign(batching.preferred_batch_size().begin(),
                                            batching.preferred_batch_size().end());
  out.batching.max_queue_delay_us = batching.max_queue_delay_microseconds();
  out.pad_new_batches = !in.exact_shapes_only();
  for (const auto& [symbol, range] : in.symbol_ranges()) {
    out.ranges[symbol] = {range.min(), range.max()};
  }
  for (const kiln::v1::SymbolSizes& shape : in.eager_shapes()) {
    out.eager.emplace_back(shape.sizes().begin(), shape.sizes().end());
  }
  return out;
}

// Shape options on a model whose shapes are all fixed: InvalidArgument.
absl::Status RefuseShapeOptions(const kiln::v1::CompileOptions& in, bool onnx) {
  const char* what = in.dynamic_batching().max_batch_size() > 0 ? "dynamic batching"
                     : !in.symbol_ranges().empty()              ? "symbol_ranges"
                     : !in.eager_shapes().empty()               ? "eager_shapes"
                                                                : nullptr;
  if (what == nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, " needs inputs with symbolic dims (dynamic batching: a symbolic dim 0), but ",
      onnx ? "this model's input shapes are all fixed"
           : "this graph's are all fixed; declare one with dims -1 and dim_params"));
}

// The shapes a symbolic model loads at, by input name: the first eager
// shape, else every symbol at the least size its range allows.
absl::StatusOr<engine::ShapeBinding> LoadShapes(const engine::SymbolicModel& model) {
  engine::SymbolBinding sizes;
  if (!model.eager.empty()) {
    sizes = model.eager.front();
  } else {
    for (const TensorSignature& in : model.signature.inputs) {
      for (const std::string& symbol : in.symbols) {
        if (symbol.empty()) continue;
        auto range = model.ranges.find(symbol);
        sizes[symbol] = range != model.ranges.end() ? std::max<int64_t>(1, range->second.min) : 1;
      }
    }
  }
  absl::StatusOr<std::vector<std::vector<int64_t>>> shapes =
      engine::BindSymbols(model.signature, sizes);
  if (!shapes.ok()) return shapes.status();
  engine::ShapeBinding binding;
  for (size_t i = 0; i < shapes->size(); ++i) {
    binding[model.signature.inputs[i].name] = (*shapes)[i];
  }
  return binding;
}

}  // namespace

absl::StatusOr<kiln::v1::CompileModelResponse> CompilerService::Compile(
    const kiln::v1::CompileModelRequest& request, const engine::CompileEventSink& events,
    absl::Time deadline, std::function<bool()> stop, const std::string& external_data_dir,
    bool beside, bool publish) {
  const bool onnx = request.model_case() == kiln::v1::CompileModelRequest::kOnnxModel;
  if (!onnx && request.model_case() != kiln::v1::CompileModelRequest::kGraph) {
    return absl::InvalidArgumentError("the request carries no model");
  }
  const std::string name = !request.model_name().empty() ? request.model_name()
                           : onnx                        ? ""
                                                         : request.graph().name();
  if (name.empty()) {
    return absl::InvalidArgumentError("no model name: set model_name or the graph's name");
  }
  if (absl::Status valid = ValidateModelName(name); !valid.ok()) return valid;
  if (request.version() < 0) {
    return absl::InvalidArgumentError("a model version is a positive number (0: automatic)");
  }
  engine::ModelIdentity identity{Fingerprint(request), request.replace(), request.version(),
                                 beside};
  if (publish && !beside && external_data_dir.empty()) {
    // A name another replica registered is this one's too: without
    // `replace` it is ALREADY_EXISTS here as there, with it the next version
    // of the cluster's.
    if (absl::Status s = CheckWithStore(request, name, &identity); !s.ok()) return s;
  }
  if (absl::Status s = models_->CheckServable(name, identity); !s.ok()) return s;
  // Calls for the name meanwhile hear that it is compiling, then (unless it
  // loads) why it failed.
  engine::CompileStates::Mark compiling = models_->states().Begin(name);
  absl::StatusOr<kiln::v1::CompileModelResponse> compiled =
      CompileNamed(request, name, identity, events, deadline, std::move(stop), external_data_dir);
  if (!compiled.ok() && IsTheModelsFault(compiled.status())) {
    models_->states().Failed(name, compiled.status());
  }
  if (compiled.ok() && publish && store_ != nullptr) {
    if (!beside) {
      PublishToStore(request, name, compiled->version(), external_data_dir);
    } else {
      // The store maps a name to one version: of a repository's, the
      // highest served here (what a request naming none gets), not the one
      // whose compile ended last. Checked and published under one lock, so
      // that a lower version's publish cannot land after a higher one's.
      absl::MutexLock lock(&publish_mutex_);
      const std::vector<int64_t> versions = models_->Versions(name);
      if (!versions.empty() && versions.back() == compiled->version()) {
        PublishToStore(request, name, compiled->version(), external_data_dir);
      }
    }
  }
  if (compiled.ok() && !beside) {
    // The name serves this one model now, not the repository's versions.
    absl::MutexLock lock(&repository_mutex_);
    policies_.erase(name);
  }
  return compiled;
}

absl::StatusOr<kiln::v1::CompileModelResponse> CompilerService::CompileNamed(
    const kiln::v1::CompileModelRequest& request, const std::string& name,
    const engine::ModelIdentity& identity, const engine::CompileEventSink& events,
    absl::Time deadline, std::function<bool()> stop, const std::string& external_data_dir) {
  const bool onnx = request.model_case() == kiln::v1::CompileModelRequest::kOnnxModel;
  if (request.options().has_opt_level() &&
      (request.options().opt_level() < 0 || request.options().opt_level() > 3)) {
    return absl::InvalidArgumentError(
        absl::StrCat("opt_level ", request.options().opt_level(), " is outside 0..3"));
  }
  if (request.options().max_fuse_depth() < 0 ||
      request.options().max_fuse_depth() > kMaxFuseDepthLimit) {
    return absl::InvalidArgumentError(absl::StrCat("max_fuse_depth ",
                                                   request.options().max_fuse_depth(),
                                                   " is outside 1..", kMaxFuseDepthLimit,
                                                   " (0: the default, 256)"));
  }
  // Cheap checks above; the parse and compile below wait for a slot.
  absl::StatusOr<CompileSlots::Slot> slot = compile_slots_.Acquire(deadline);
  if (!slot.ok()) return slot.status();
  OnnxImportOptions import_options;
  import_options.max_nodes = limits_.max_graph_nodes;
  import_options.external_data_dir = external_data_dir;
  import_options.max_external_data_bytes = limits_.max_upload_bytes;
  for (const auto& [input, dims] : request.options().input_shapes()) {
    import_options.input_shapes[input].assign(dims.values().begin(), dims.values().end());
  }
  // The model at given input shapes (none: as declared, which must be
  // concrete), for a symbolic model's other shapes. Made only for those: it
  // keeps a copy of the model, shared by every copy of the function.
  auto make_import = [&]() -> engine::GraphForShapes {
    if (onnx) {
      return [bytes = std::make_shared<const std::string>(request.onnx_model()),
              import_options](const engine::ShapeBinding& shapes,
                              const engine::ValueBinding& values) {
        OnnxImportOptions fixed = import_options;
        fixed.probe_libonnx = false;  // these bytes passed the probe at load
        for (const auto& [input, dims] : shapes) fixed.input_shapes[input] = dims;
        fixed.input_values = values;
        return ImportOnnxModel(*bytes, OpRegistry::Default(), fixed);
      };
    }
    return [graph = std::make_shared<const kiln::v1::Graph>(request.graph()),
            max_nodes = limits_.max_graph_nodes](const engine::ShapeBinding& shapes,
                                                 const engine::ValueBinding&) {
      return ImportKilnGraph(*graph, OpRegistry::Default(), &shapes, max_nodes);
    };
  };
  absl::StatusOr<CompileOptions> converted = ToCompileOptions(request.options());
  if (!converted.ok()) return converted.status();
  CompileOptions options = *std::move(converted);
  options.should_stop = std::move(stop);
  engine::SymbolicModel symbolic = ToSymbolicModel(request.options());
  absl::StatusOr<engine::CompileResult> result;
  // The shapes the model loads at: the declared ones, or for a symbolic
  // model the first eager shape (else every symbol at its least size).
  engine::ShapeBinding load;
  auto load_shapes = [&](const ModelSignature& signature) -> absl::StatusOr<engine::ShapeBinding> {
    if (!signature.IsSymbolic()) return engine::ShapeBinding{};
    symbolic.signature = signature;
    absl::StatusOr<engine::ShapeBinding> bound = LoadShapes(symbolic);
    if (bound.ok()) load = *bound;
    return bound;
  };
  std::optional<ModelSignature> signature;
  absl::StatusOr<Graph> graph = absl::UnknownError("not imported");
  if (onnx) {
    // One parse for the signature and the load-time graph.
    absl::StatusOr<OnnxModelImport> imported = ImportOnnxModelWithSignature(
        request.onnx_model(), OpRegistry::Default(), import_options, load_shapes);
    if (!imported.ok()) return NameTheFlag(imported.status());
    signature = std::move(imported->signature);
    graph = std::move(imported->graph);
  } else {
    absl::StatusOr<ModelSignature> read = ReadKilnGraphSignature(request.graph());
    if (!read.ok()) return read.status();
    signature = *std::move(read);
    if (absl::Status s = load_shapes(*signature).status(); !s.ok()) return s;
    graph = ImportKilnGraph(request.graph(), OpRegistry::Default(), &load,
                            limits_.max_graph_nodes);
  }
  std::string deferred;
  if (!graph.ok()) {
    // Inputs whose values decide shapes: nothing compiles before a request
    // brings them; each value then compiles once (a variant of its own).
    const std::vector<std::string> deciding = InputsThatDecideShapes(graph.status());
    if (deciding.empty()) return NameTheFlag(graph.status());
    for (TensorSignature& in : signature->inputs) {
      in.decides_shapes = std::find(deciding.begin(), deciding.end(), in.name) != deciding.end();
    }
    deferred = std::string(graph.status().message());
  }
  if (!signature->IsSymbolic()) {
    if (absl::Status s = RefuseShapeOptions(request.options(), onnx); !s.ok()) return s;
    result = models_->Compile(name, *std::move(graph), options, events, deadline, identity);
  } else {
    symbolic.signature = *std::move(signature);
    symbolic.graph_for = make_import();
    // What make_import's function keeps: charged while the model is loaded.
    symbolic.source_bytes = onnx ? static_cast<int64_t>(request.onnx_model().size())
                                 : static_cast<int64_t>(request.graph().ByteSizeLong());
    if (deferred.empty()) {
      // Outputs that declare no shape get theirs from the graph.
      if (absl::Status s = FillOutputDims(symbolic.signature, symbolic.graph_for, load);
          !s.ok()) {
        return s;
      }
    }
    std::optional<Graph> loaded;
    if (deferred.empty()) loaded = *std::move(graph);
    result = models_->CompileWithShapes(name, std::move(loaded), std::move(symbolic), options,
                                        events, deadline, identity);
  }
  if (!result.ok()) return result.status();
  kiln::v1::CompileModelResponse response;
  response.set_model_name(name);
  response.set_version(result->version);
  FillCompileReport(*result, response.mutable_report());
  response.mutable_report()->set_deferred(deferred);
  if (absl::StatusOr<engine::ServedModel> served =
          models_->Serve(name, std::to_string(result->version));
      served.ok()) {
    FillLoadedMemory(engine::MemoryOf(*served), response.mutable_report()->mutable_loaded());
  }
  return response;
}

grpc::Status CompilerService::CompileModel(grpc::ServerContext* context,
                                           const kiln::v1::CompileModelRequest* request,
                                           kiln::v1::CompileModelResponse* response) {
  if (grpc::Status a = Authorize(tokens_.get(), *context, Scope::kAdmin, "CompileModel"); !a.ok()) {
    return a;
  }
  absl::StatusOr<kiln::v1::CompileModelResponse> result =
      Compile(*request, nullptr, absl::FromChrono(context->deadline()), StopCheck(context));
  if (!result.ok()) return Fail("CompileModel", result.status(), request->model_name());
  *response = *std::move(result);
  return grpc::Status::OK;
}

namespace {

// The model an UploadModel call carries: its header's request with the
// chunks' bytes in place, checked against the header's size and digest.
absl::StatusOr<kiln::v1::CompileModelRequest> ReceiveUpload(
    grpc::ServerReader<kiln::v1::ModelChunk>* reader, int64_t max_bytes) {
  kiln::v1::ModelChunk chunk;
  if (!reader->Read(&chunk) || !chunk.has_header()) {
    return absl::InvalidArgumentError("an upload starts with its header");
  }
  const kiln::v1::UploadHeader header = chunk.header();
  if (header.total_bytes() <= 0) {
    return absl::InvalidArgumentError("the upload header's total_bytes must be positive");
  }
  if (header.total_bytes() > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the model's ", header.total_bytes(), " bytes are more than the server takes, ",
        max_bytes, " (--max-upload-mb)"));
  }
  std::string bytes;
  bytes.reserve(static_cast<size_t>(header.total_bytes()));
  while (reader->Read(&chunk)) {
    if (chunk.has_header()) return absl::InvalidArgumentError("a second upload header");
    if (static_cast<int64_t>(bytes.size() + chunk.data().size()) > header.total_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the chunks hold more than the header's ", header.total_bytes(), " bytes"));
    }
    bytes += chunk.data();
  }
  if (static_cast<int64_t>(bytes.size()) != header.total_bytes()) {
    return absl::InvalidArgumentError(absl::StrCat("the upload ended after ", bytes.size(),
                                                   " of ", header.total_bytes(), " bytes"));
  }
  if (!header.sha256().empty() && absl::AsciiStrToLower(header.sha256()) != Sha256Hex(bytes)) {
    return absl::InvalidArgumentError(
        "the bytes received do not match the header's sha256: the upload was damaged");
  }
  kiln::v1::CompileModelRequest request = header.request();
  if (header.graph()) {
    if (!request.mutable_graph()->ParseFromString(bytes)) {
      return absl::InvalidArgumentError("the uploaded bytes are not a kiln.v1.Graph");
    }
  } else {
    request.set_onnx_model(std::move(bytes));
  }
  return request;
}

}  // namespace

grpc::Status CompilerService::UploadModel(grpc::ServerContext* context,
                                          grpc::ServerReader<kiln::v1::ModelChunk>* reader,
                                          kiln::v1::CompileModelResponse* response) {
  if (grpc::Status a = Authorize(tokens_.get(), *context, Scope::kAdmin, "UploadModel");
      !a.ok()) {
    return a;
  }
  absl::StatusOr<kiln::v1::CompileModelRequest> request =
      ReceiveUpload(reader, limits_.max_upload_bytes);
  if (!request.ok()) return Fail("UploadModel", request.status());
  absl::StatusOr<kiln::v1::CompileModelResponse> result =
      Compile(*request, nullptr, absl::FromChrono(context->deadline()), StopCheck(context));
  if (!result.ok()) return Fail("UploadModel", result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

grpc::Status CompilerService::CompileModelStream(
    grpc::ServerContext* context, const kiln::v1::CompileModelRequest* request,
    grpc::ServerWriter<kiln::v1::CompileProgress>* writer) {
  if (grpc::Status a = Authorize(tokens_.get(), *context, Scope::kAdmin, "CompileModelStream");
      !a.ok()) {
    return a;
  }
  // Events come from compile threads; writes are serialised. A client that
  // goes away stops the events, not the compile: its kernels still get cached.
  absl::Mutex write_mutex;
  engine::CompileEventSink sink = [&](const engine::CompileEvent& e) {
    if (context->IsCancelled()) return;
    kiln::v1::CompileProgress progress;
    switch (e.kind) {
      case engine::CompileEvent::Kind::kPassDone:
        progress.set_kind(kiln::v1::CompileProgress::PASS_DONE);
        break;
      case engine::CompileEvent::Kind::kPassSkipped:
        progress.set_kind(kiln::v1::CompileProgress::PASS_SKIPPED);
        break;
      case engine::CompileEvent::Kind::kKernelDone:
        progress.set_kind(kiln::v1::CompileProgress::KERNEL_DONE);
        break;
    }
    progress.set_name(e.name);
    progress.set_ms(e.ms);
    progress.set_detail(e.detail);
    progress.set_kernels_done(e.done);
    progress.set_kernels_total(e.total);
    absl::MutexLock lock(&write_mutex);
    writer->Write(progress);
  };
  absl::StatusOr<kiln::v1::CompileModelResponse> result =
      Compile(*request, sink, absl::FromChrono(context->deadline()), StopCheck(context));
  if (!result.ok()) return Fail("CompileModelStream", result.status());
  kiln::v1::CompileProgress finished;
  finished.set_kind(kiln::v1::CompileProgress::FINISHED);
  *finished.mutable_response() = *std::move(result);
  absl::MutexLock lock(&write_mutex);
  writer->Write(finished);
  return grpc::Status::OK;
}

grpc::Status CompilerService::ListKernels(grpc::ServerContext* context,
                                          const kiln::v1::ListKernelsRequest*,
                                          kiln::v1::ListKernelsResponse* response) {
  if (grpc::Status a = Authorize(tokens_.get(), *context, Scope::kAdmin, "ListKernels"); !a.ok()) {
    return a;
  }
  for (const engine::KernelInfo& k : models_->GetCacheStats().entries) {
    kiln::v1::KernelSummary* s = response->add_kernels();
    s->set_key(k.key_hex);
    s->set_symbol(k.symbol);
    for (const std::string& op : k.ops) s->add_ops(op);
    for (const TensorType& t : k.arg_types) {
      kiln::v1::TensorValue* v = s->add_args();
      v->set_datatype(DatatypeName(t.dtype));
      for (int64_t d : t.shape) v->add_shape(d);
    }
    s->set_compile_ms(k.compile_ms);
    s->set_hits(k.hits);
  }
  return grpc::Status::OK;
}

namespace {

absl::StatusOr<runtime::Tensor> DecodeTensorValue(const kiln::v1::TensorValue& v, size_t index) {
  TensorType type;
  absl::StatusOr<DType> dtype = DTypeFromDatatype(v.datatype(), absl::StrCat("argument ", index));
  if (!dtype.ok()) return dtype.status();
  type.dtype = *dtype;
  type.shape.assign(v.shape().begin(), v.shape().end());
  absl::StatusOr<int64_t> n = CheckedNumElements(type.shape);
  if (!n.ok()) return absl::InvalidArgumentError(absl::StrCat("argument ", index, ": ", n.status().message()));
  absl::StatusOr<runtime::Tensor> t = runtime::Tensor::FromBytes(type, v.raw());
  if (!t.ok()) {
    return absl::Status(t.status().code(),
                        absl::StrCat("argument ", index, ": ", t.status().message()));
  }
  return t;
}

absl::StatusOr<std::vector<runtime::Tensor>> DecodeArguments(
    const google::protobuf::RepeatedPtrField<kiln::v1::TensorValue>& values) {
  std::vector<runtime::Tensor> out;
  for (int i = 0; i < values.size(); ++i) {
    absl::StatusOr<runtime::Tensor> t = DecodeTensorValue(values[i], i);
    if (!t.ok()) return t.status();
    out.push_back(*std::move(t));
  }
  return out;
}

bool PastDeadline(const grpc::ServerContext* context) {
  return context->deadline() <= std::chrono::system_clock::now();
}

}  // namespace

grpc::Status CompilerService::CallKernel(grpc::ServerContext* context,
                                         const kiln::v1::CallKernelRequest* request,
                                         kiln::v1::CallKernelResponse* response) {
  if (grpc::Status a = Authorize(tokens_.get(), *context, Scope::kAdmin, "CallKernel"); !a.ok()) {
    return a;
  }
  BindHandlerThreadOrWarn(inference_cpus_, "CallKernel");
  auto found = models_->cache().Find(request->key());
  if (!found.ok()) return Fail("CallKernel", found.status());
  absl::StatusOr<std::vector<runtime::Tensor>> inputs = DecodeArguments(request->inputs());
  if (!inputs.ok()) return Fail("CallKernel", inputs.status());
  std::vector<const runtime::Tensor*> pointers;
  for (const runtime::Tensor& t : *inputs) pointers.push_back(&t);
  if (PastDeadline(context)) {
    return Fail("CallKernel", absl::DeadlineExceededError("deadline passed before the call"));
  }
  auto result = runtime::CallKernel(*found->first, found->second.arg_types, pointers);
  if (!result.ok()) return Fail("CallKernel", result.status());
  kiln::v1::TensorValue* out = response->mutable_output();
  out->set_datatype(DatatypeName(result->output.type().dtype));
  for (int64_t d : result->output.type().shape) out->add_shape(d);
  out->set_raw(std::string(result->output.bytes()));
  response->set_run_ns(result->run_ns);
  return grpc::Status::OK;
}

grpc::Status CompilerService::BenchmarkKernel(grpc::ServerContext* context,
                                              const kiln::v1::BenchmarkKernelRequest* request,
                                              kiln::v1::BenchmarkKernelResponse* response) {
  if (grpc::Status a = Authorize(tokens_.get(), *context, Scope::kAdmin, "BenchmarkKernel");
      !a.ok()) {
    return a;
  }
  BindHandlerThreadOrWarn(inference_cpus_, "BenchmarkKernel");
  if (request->number() < 0 || request->number() > 1000000 || request->repeat() < 0 ||
      request->repeat() > 10000 || request->warmup() < 0 || request->warmup() > 10000 ||
      request->min_repeat_ms() < 0 || request->min_repeat_ms() > 60000) {
    return Fail("BenchmarkKernel",
                absl::InvalidArgumentError("number 0..1e6, repeat 0..1e4, warmup 0..1e4 and "
                                           "min_repeat_ms 0..60000 please"));
  }
  // One benchmark holds a thread (and a core) for at most this long.
  constexpr double kMaxBenchmarkMs = 10 * 60 * 1000;
  if (std::max(1, request->repeat()) * request->min_repeat_ms() > kMaxBenchmarkMs) {
    return Fail("BenchmarkKernel",
                absl::InvalidArgumentError("repeat x min_repeat_ms asks for more than the 10 "
                                           "minutes one benchmark may take"));
  }
  auto found = models_->cache().Find(request->key());
  if (!found.ok()) return Fail("BenchmarkKernel", found.status());
  const std::vector<TensorType>& types = found->second.arg_types;
  std::vector<runtime::Tensor> inputs;
  if (request->inputs().empty()) {
    for (size_t i = 0; i + 1 < types.size(); ++i) {
      absl::StatusOr<runtime::Tensor> t = runtime::Tensor::Allocate(types[i]);
      if (!t.ok()) return Fail("BenchmarkKernel", t.status());
      inputs.push_back(*std::move(t));
    }
  } else {
    absl::StatusOr<std::vector<runtime::Tensor>> decoded = DecodeArguments(request->inputs());
    if (!decoded.ok()) return Fail("BenchmarkKernel", decoded.status());
    inputs = *std::move(decoded);
  }
  std::vector<const runtime::Tensor*> pointers;
  for (const runtime::Tensor& t : inputs) pointers.push_back(&t);
  // One checked call first: bad arguments fail here, not inside the timing loop.
  auto first = runtime::CallKernel(*found->first, types, pointers);
  if (!first.ok()) return Fail("BenchmarkKernel", first.status());
  if (PastDeadline(context)) {
    return Fail("BenchmarkKernel", absl::DeadlineExceededError("deadline passed"));
  }
  std::vector<void*> args;
  for (const runtime::Tensor* t : pointers) args.push_back(const_cast<void*>(t->data()));
  args.push_back(first->output.data());
  // A bounds-checked kernel's fault slot (common/kernel_abi.h). The first
  // call ran on these inputs without a fault, so none is looked for here.
  abi::KernelFault fault;
  args.push_back(&fault);
  runtime::KernelFn fn = found->first->fn();
  runtime::TimeEvaluatorOptions options;
  options.number = request->number() > 0 ? request->number() : 1;
  options.repeat = request->repeat() > 0 ? request->repeat() : 3;
  options.min_repeat_ms = request->min_repeat_ms();
  options.warmup = request->warmup();
  options.stop = [context] { return context->IsCancelled() || PastDeadline(context); };
  runtime::TimeEvaluation e = runtime::EvaluateTime([&] { fn(args.data()); }, options);
  if (e.stopped) {
    return Fail("BenchmarkKernel",
                context->IsCancelled()
                    ? absl::CancelledError("the call was cancelled; the benchmark stopped")
                    : absl::DeadlineExceededError("the deadline passed; the benchmark stopped"));
  }
  for (double r : e.results_s) response->add_results_s(r);
  response->set_mean_s(e.mean_s);
  response->set_median_s(e.median_s);
  response->set_min_s(e.min_s);
  response->set_max_s(e.max_s);
  response->set_std_s(e.std_s);
  response->set_p90_s(e.p90_s);
  response->set_p99_s(e.p99_s);
  response->set_number(e.number);
  FillKernelRoofline(found->second, e.median_s, runtime::GetParallelThreads(),
                     response->mutable_roofline());
  return grpc::Status::OK;
}

namespace {

void FillKernelTuning(const engine::KernelTuning& k, kiln::v1::KernelTuning* out) {
  out->set_name(k.name);
  out->set_instances(k.instances);
  out->set_default_schedule(k.default_schedule);
  out->set_best_schedule(k.best_schedule);
  out->set_best_override(k.best_override);
  out->set_default_us(k.default_us);
  out->set_best_us(k.best_us);
  out->set_candidates(k.candidates);
  out->set_seconds(k.seconds);
  out->set_recorded(k.recorded);
}

}  // namespace

grpc::Status CompilerService::TuneModel(grpc::ServerContext* context,
                                        const kiln::v1::TuneModelRequest* request,
                                        grpc::ServerWriter<kiln::v1::TuneProgress>* writer) {
  if (grpc::Status a = Authorize(tokens_.get(), *context, Scope::kAdmin, "TuneModel"); !a.ok()) {
    return a;
  }
  if (request->budget_s_per_kernel() < 0 || request->budget_s_per_kernel() > 3600 ||
      request->max_candidates() < 0 || request->max_candidates() > 256 ||
      (request->has_min_gain() && (request->min_gain() < 0 || request->min_gain() > 100))) {
    return Fail("TuneModel", absl::InvalidArgumentError(
                                 "budget_s_per_kernel 0..3600, max_candidates 0..256 and "
                                 "min_gain 0..100 please"));
  }
  const kiln::v1::CompileModelRequest& model = request->model();
  const bool onnx = model.model_case() == kiln::v1::CompileModelRequest::kOnnxModel;
  if (!onnx && model.model_case() != kiln::v1::CompileModelRequest::kGraph) {
    return Fail("TuneModel", absl::InvalidArgumentError("the request carries no model"));
  }
  // Tuning compiles like a compile does, so it takes a compile slot; it
  // times kernels, so its thread runs where inference would.
  absl::StatusOr<CompileSlots::Slot> slot =
      compile_slots_.Acquire(absl::FromChrono(context->deadline()));
  if (!slot.ok()) return Fail("TuneModel", slot.status());
  BindHandlerThreadOrWarn(inference_cpus_, "TuneModel");
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& [input, dims] : model.options().input_shapes()) {
    shapes[input].assign(dims.values().begin(), dims.values().end());
  }
  absl::StatusOr<Graph> graph = absl::UnknownError("not imported");
  if (onnx) {
    OnnxImportOptions import_options;
    import_options.max_nodes = limits_.max_graph_nodes;
    import_options.input_shapes = shapes;
    graph = ImportOnnxModel(model.onnx_model(), OpRegistry::Default(), import_options);
  } else {
    graph = ImportKilnGraph(model.graph(), OpRegistry::Default(), &shapes,
                            limits_.max_graph_nodes);
  }
  if (!graph.ok()) return Fail("TuneModel", NameTheFlag(graph.status()));
  absl::StatusOr<CompileOptions> converted = ToCompileOptions(model.options());
  if (!converted.ok()) return Fail("TuneModel", converted.status());
  CompileOptions options = *std::move(converted);
  engine::TuneOptions tune;
  if (request->budget_s_per_kernel() > 0) tune.budget_s_per_kernel = request->budget_s_per_kernel();
  if (request->max_candidates() > 0) tune.max_candidates = request->max_candidates();
  if (request->has_min_gain()) tune.min_gain = request->min_gain();
  tune.codegen = models_->codegen();
  tune.should_stop = StopCheck(context);
  auto sink = [&](const engine::KernelTuning& k, int done, int total) {
    if (context->IsCancelled()) return;
    kiln::v1::TuneProgress progress;
    progress.set_kind(kiln::v1::TuneProgress::KERNEL_TUNED);
    FillKernelTuning(k, progress.mutable_kernel());
    progress.set_kernels_done(done);
    progress.set_kernels_total(total);
    writer->Write(progress);
  };
  absl::StatusOr<engine::TuneResult> result =
      engine::TuneGraph(*graph, options, tune, models_->cache(), sink);
  if (!result.ok()) return Fail("TuneModel", result.status());
  kiln::v1::TuneProgress finished;
  finished.set_kind(kiln::v1::TuneProgress::FINISHED);
  for (const engine::KernelTuning& k : result->kernels) {
    FillKernelTuning(k, finished.add_kernels());
  }
  finished.set_records_written(result->records_written);
  finished.set_seconds(result->seconds);
  const engine::TuningCpu& cpu = models_->cache().tuning().host();
  finished.set_cpu(absl::StrCat(cpu.model, " (", cpu.cpu, ")"));
  writer->Write(finished);
  return grpc::Status::OK;
}

grpc::Status CompilerService::GetCacheStats(grpc::ServerContext* context,
                                            const kiln::v1::GetCacheStatsRequest*,
                                            kiln::v1::GetCacheStatsResponse* response) {
  if (grpc::Status a = Authorize(tokens_.get(), *context, Scope::kAdmin, "GetCacheStats");
      !a.ok()) {
    return a;
  }
  FillCacheStats(models_->GetCacheStats(), response);
  return grpc::Status::OK;
}

grpc::Status CompilerService::GetTimingStats(grpc::ServerContext* context,
                                             const kiln::v1::GetTimingStatsRequest* request,
                                             kiln::v1::GetTimingStatsResponse* response) {
  if (grpc::Status a = Authorize(tokens_.get(), *context, Scope::kInfer, "GetTimingStats");
      !a.ok()) {
    return a;
  }
  if (!request->model_name().empty()) {
    absl::StatusOr<engine::ServedModel> served = models_->Serve(request->model_name(), "");
    if (!served.ok()) return Fail("GetTimingStats", served.status());
    FillModelTiming(*served, response->add_models());
    return grpc::Status::OK;
  }
  for (const engine::ServedModel& served : models_->List()) {
    FillModelTiming(served, response->add_models());
  }
  return grpc::Status::OK;
}

grpc::Status CompilerService::ListModels(grpc::ServerContext* context,
                                         const kiln::v1::ListModelsRequest*,
                                         kiln::v1::ListModelsResponse* response) {
  if (grpc::Status a = Authorize(tokens_.get(), *context, Scope::kInfer, "ListModels"); !a.ok()) {
    return a;
  }
  const engine::MemoryBudget& budget = models_->budget();
  response->set_loaded_bytes(budget.used_bytes());
  response->set_max_loaded_bytes(budget.max_bytes());
  response->set_variants_unloaded(budget.unloads());
  for (const engine::ServedModel& served : models_->List()) {
    kiln::v1::ModelSummary* s = response->add_models();
    s->set_name(served.name);
    s->set_version(served.version);
    FillLoadedMemory(engine::MemoryOf(served), s->mutable_memory());
    if (!served.model) {  // nothing compiled yet: as declared
      for (const TensorSignature& in : served.variants->signature().inputs) {
        FillValueInfo(in, s->add_inputs());
      }
      for (const TensorSignature& out : served.variants->signature().outputs) {
        FillValueInfo(out, s->add_outputs());
      }
      continue;
    }
    const Program& p = served.model->program();
    s->set_kernels(static_cast<int>(p.kernels.size()));
    for (int v : p.inputs) FillValueInfo(p.values[v], s->add_inputs());
    for (size_t i = 0; i < p.outputs.size(); ++i) {
      kiln::v1::ValueInfo* out = s->add_outputs();
      FillValueInfo(p.values[p.outputs[i]], out);
      out->set_name(p.output_names[i]);
    }
  }
  return grpc::Status::OK;
}

grpc::Status CompilerService::UnloadModel(grpc::ServerContext* context,
                                          const kiln::v1::UnloadModelRequest* request,
                                          kiln::v1::UnloadModelResponse*) {
  if (grpc::Status a = Authorize(tokens_.get(), *context, Scope::kAdmin, "UnloadModel"); !a.ok()) {
    return a;
  }
  // Cluster-wide: also a name compiled on another replica and not loaded here.
  absl::Status s = UnloadEverywhere(request->model_name());
  if (!s.ok()) return Fail("UnloadModel", s, request->model_name());
  return grpc::Status::OK;
}

grpc::Status CompilerService::GetServerInfo(grpc::ServerContext* context,
                                            const kiln::v1::GetServerInfoRequest*,
                                            kiln::v1::GetServerInfoResponse* response) {
  if (grpc::Status a = Authorize(tokens_.get(), *context, Scope::kInfer, "GetServerInfo");
      !a.ok()) {
    return a;
  }
  const codegen::HostTarget& host = codegen::GetHostTarget();
  response->set_version(kKilnVersion);
  response->set_llvm_version(codegen::LlvmVersionString());
  response->set_target_triple(host.triple);
  response->set_cpu(host.cpu);
  for (const std::string& f : host.features) response->add_cpu_features(f);
  for (const std::string& op : OpRegistry::Default().Names()) response->add_ops(op);
  response->set_threads(runtime::GetParallelThreads());
  return grpc::Status::OK;
}

}  // namespace kiln::server
