#include "wire/session_up_frame.h"

#include <utility>

#include "google/protobuf/descriptor.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/impl/codegen/server_callback_handlers.h"

namespace psync::wire {

void SessionUpFrame::Parse(grpc::ByteBuffer* buffer) {
  parsed_ = grpc::SerializationTraits<v1::SessionUp>::Deserialize(buffer, message_.get()).ok();
  buffer->Clear();  // the codec leaves a buffer it could not read
}

int SessionMethodIndex() {
  static const int index = [] {
    const google::protobuf::ServiceDescriptor* service =
        v1::SessionUp::descriptor()->file()->FindServiceByName("Coordinator");
    GPR_ASSERT(service != nullptr);
    const google::protobuf::MethodDescriptor* method = service->FindMethodByName("Session");
    GPR_ASSERT(method != nullptr);
    return method->index();
  }();
  return index;
}

grpc::internal::MethodHandler* NewSessionHandler(
    std::function<SessionReactor*(grpc::CallbackServerContext*)> make) {
  return new grpc::internal::CallbackBidiHandler<SessionUpFrame, v1::SessionDown>(std::move(make));
}

}  // namespace psync::wire
