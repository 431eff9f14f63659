#pragma once
// UTF-8 checks for text that arrives as bytes (log lines, query parameters): strict decoding
// (no overlong forms, no surrogates, nothing past U+10FFFF).

#include <cstddef>
#include <string>
#include <string_view>

namespace tessera {

// The length (1 to 4) of the valid UTF-8 sequence that starts at s[i], or 0 when the bytes there
// are not one.
std::size_t Utf8SequenceLength(std::string_view s, std::size_t i);

bool IsValidUtf8(std::string_view s);

// `s` with every byte that does not belong to a valid sequence replaced by U+FFFD, so that text
// printed by any process can go into JSON. Valid input comes back unchanged.
std::string ToValidUtf8(std::string_view s);

}  // namespace tessera
