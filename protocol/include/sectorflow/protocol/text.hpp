// Text that came from a peer: checked before it is taken for a string (keys, record fields), and
// quoted safely in error messages. Shared by the decoders of every contract (records, kvmsg).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace sectorflow::protocol {

/// True if `text` is well-formed UTF-8 (no overlong forms, surrogates or code points past
/// U+10FFFF): what Python and every msgpack reader expect of a key or a msgpack str.
bool valid_utf8(std::string_view text);

/// `text` quoted for an error message: cut after a few dozen bytes ("'abc...'") and with every byte
/// outside printable ASCII written as \xNN, so that a name or value from a peer can make neither
/// a message as long as the input nor one that is not text.
std::string shown(std::string_view text);

/// `text` cut to at most `max_bytes`, never inside a UTF-8 sequence: a text field's bound applied
/// to a message a failing service writes, which must not turn into a second error.
std::string_view cut_text(std::string_view text, std::size_t max_bytes);

}  // namespace sectorflow::protocol
