/* Empty stand-in for the MMX header, which Emscripten does not provide. Eigen's SSE path
   includes it through <xmmintrin.h> but uses no MMX intrinsic. Only on the wasm include path. */
#pragma once
