// The MessagePack cursor and the record decoders on arbitrary bytes: the
// content of a frame after decompression (and of header and trailer frames).
#include <cstddef>
#include <cstdint>
#include <span>

#include "format/msgpack_cursor.h"
#include "format/records.h"

using memtrack::msgpack_cursor::Cursor;
using memtrack::msgpack_cursor::DecodeError;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  // Records one after the other, as in a frame.
  try {
    Cursor in(data, data + size);
    memtrack::records::DecodeNotes notes;
    memtrack::Event event;
    memtrack::ModuleInfo module;
    while (!in.at_end()) memtrack::records::decode_event(in, event, notes, memtrack::records::kAllTypes, &module);
  } catch (const DecodeError&) {
  }
  // Values skipped without being understood (unknown keys, unknown records).
  try {
    Cursor in(data, data + size);
    while (!in.at_end()) in.skip_value();
  } catch (const DecodeError&) {
  }
  // Header and trailer payloads.
  try {
    switch (memtrack::records::classify_skippable(bytes)) {
      case memtrack::records::SkippableKind::Header:
        memtrack::records::decode_header(bytes);
        break;
      case memtrack::records::SkippableKind::Trailer:
        memtrack::records::decode_trailer(bytes);
        break;
      case memtrack::records::SkippableKind::Unknown:
        break;
    }
  } catch (const DecodeError&) {
  }
  return 0;
}
