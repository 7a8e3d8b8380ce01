// libFuzzer target for the inbound frame decoder: FrameSplitter, verify_payload(), and reading
// a verified message in full (tests/fuzz/decode_input.h). Run by tools/test.sh:
//   build-fuzz/tests/fuzz/frame_fuzzer -max_total_time=20 SCRATCH_DIR tests/fuzz/corpus
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "tests/fuzz/decode_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  corral::proto::JsonCodec& json = corral::fuzz::fuzz_json_codec();
  const corral::fuzz::DecodeOutcome out = corral::fuzz::decode_input({data, size}, json);
  // The splitter must yield exactly the frames a plain walk of the prefixes finds.
  if (out.frames.size() != out.walked_frames) std::abort();
  // A refused stream is refused for its size, and only then.
  if (out.stream_refused != (out.stream_error.code == corral::proto::ErrorCode::frame_too_large &&
                             !out.stream_error.message.empty()))
    std::abort();
  // A payload the splitter let through is never refused for its size by verify_payload.
  for (const auto& f : out.frames)
    if (!f.verified && f.error == corral::proto::ErrorCode::frame_too_large) std::abort();
  return 0;
}
