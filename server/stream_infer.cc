// ModelStreamInfer: ModelInfer over one bidirectional stream, as Triton's
// clients use it (stream_infer). Requests are answered one at a time, in the
// order they came; a request that fails is answered with its error in
// error_message (and its id and model in infer_response, so a client can
// tell which) and the stream goes on. The stream itself fails only for a
// missing token.
#include "absl/synchronization/notification.h"
#include "server/call_auth.h"
#include "server/inference_service.h"

namespace kiln::server {

grpc::Status InferenceService::ModelStreamInfer(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<inference::ModelStreamInferResponse, inference::ModelInferRequest>*
        stream) {
  if (grpc::Status a = Authorize(tokens(), *context, Scope::kInfer, "ModelStreamInfer");
      !a.ok()) {
    return a;
  }
  inference::ModelInferRequest request;
  while (stream->Read(&request)) {
    inference::ModelStreamInferResponse answer;
    absl::Notification finished;
    grpc::Status status;
    StartInfer(
        request, answer.mutable_infer_response(),
        [&](const grpc::Status& s) {
          status = s;
          finished.Notify();
        },
        absl::FromChrono(context->deadline()));
    finished.WaitForNotification();
    if (!status.ok()) {
      answer.set_error_message(status.error_message());
      inference::ModelInferResponse* header = answer.mutable_infer_response();
      header->Clear();
      header->set_model_name(request.model_name());
      header->set_model_version(request.model_version());
      header->set_id(request.id());
    }
    if (!stream->Write(answer)) break;  // the client left
  }
  return grpc::Status::OK;
}

}  // namespace kiln::server
