// error.h — the one error type of vitlens.
//
// Bad input (files, images, options, classes) raises vitlens::Error with a code and a message
// that tells the user what to do. Programming errors assert instead. The CLI prints the message
// and exits non-zero; the wasm boundary turns it into a JS Error.
#pragma once

#include <stdexcept>
#include <string>

namespace vitlens {

enum class ErrorCode {
  io,              // a file could not be opened, read or written
  bad_format,      // not the file format it claims to be (magic, JSON, dtype, ...)
  bad_version,     // a format version we do not read
  truncated,       // the file ends before the data it announces
  bad_shape,       // a tensor or input whose shape does not fit the config
  bad_value,       // NaN/Inf or an out-of-range number inside a file or an input
  limit,           // a size beyond the documented limits (see limits.h)
  out_of_memory,   // memory ran out (in wasm: the engine's memory could not grow further)
  missing_tensor,  // a tensor the model needs is absent
  unknown_tensor,  // a tensor we do not know (or a duplicate)
  bad_config,      // a config that does not describe a valid ViT
  bad_image,       // an image that cannot be decoded
  bad_argument,    // a command-line or API option out of range (class, method option, ...)
  cancelled,       // the caller asked to stop a long computation
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  // `bytes`: for out_of_memory, what the failing step needed (0 when unknown).
  Error(ErrorCode code, const std::string& message, double bytes = 0)
      : std::runtime_error(message), code_(code), bytes_(bytes) {}
  ErrorCode code() const { return code_; }
  double bytes() const { return bytes_; }

 private:
  ErrorCode code_;
  double bytes_;
};

}  // namespace vitlens
