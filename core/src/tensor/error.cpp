// error.cpp — names of the error codes, as printed by the CLI and put on JS Errors.
#include "vitlens/tensor/error.h"

namespace vitlens {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::io: return "io";
    case ErrorCode::bad_format: return "bad_format";
    case ErrorCode::bad_version: return "bad_version";
    case ErrorCode::truncated: return "truncated";
    case ErrorCode::bad_shape: return "bad_shape";
    case ErrorCode::bad_value: return "bad_value";
    case ErrorCode::limit: return "limit";
    case ErrorCode::out_of_memory: return "out_of_memory";
    case ErrorCode::missing_tensor: return "missing_tensor";
    case ErrorCode::unknown_tensor: return "unknown_tensor";
    case ErrorCode::bad_config: return "bad_config";
    case ErrorCode::bad_image: return "bad_image";
    case ErrorCode::bad_argument: return "bad_argument";
    case ErrorCode::cancelled: return "cancelled";
  }
  return "unknown";
}

}  // namespace vitlens
