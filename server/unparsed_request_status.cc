#include "server/unparsed_request_status.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/support/interceptor.h"
#include "grpcpp/support/status.h"

namespace kiln::server {
namespace {

using grpc::experimental::InterceptionHookPoints;

class UnparsedRequestStatus final : public grpc::experimental::Interceptor {
 public:
  explicit UnparsedRequestStatus(std::string method) : method_(std::move(method)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() == nullptr) {
      unparsed_ = true;
    }
    if (unparsed_ &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        methods->GetSendStatus().error_code() == grpc::StatusCode::INTERNAL) {
      methods->ModifySendStatus(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("the request bytes are not a request message of ", method_)));
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  bool unparsed_ = false;
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(std::set<std::string> skipped) : skipped_(std::move(skipped)) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    const std::string method = info->method() != nullptr ? info->method() : "";
    if (skipped_.count(method)) return nullptr;
    // One request message per call only: a client stream's end also comes
    // as "no message" (UploadModel's chunks).
    if (info->type() == grpc::experimental::ServerRpcInfo::Type::CLIENT_STREAMING ||
        info->type() == grpc::experimental::ServerRpcInfo::Type::BIDI_STREAMING) {
      return nullptr;
    }
    return new UnparsedRequestStatus(method);
  }

 private:
  const std::set<std::string> skipped_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
UnparsedRequestStatusFactory(std::set<std::string> parsed_by_the_server) {
  return std::make_unique<Factory>(std::move(parsed_by_the_server));
}

}  // namespace kiln::server
