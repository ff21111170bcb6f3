"""port-forward's SPDY/3.1 framing at the kubelet API (runtime/local/portforward.py): frames cut
from a byte stream that arrives in pieces, header blocks through the dictionary-primed zlib
streams. kubectl drives the whole path in tests/runtime/local/controlplane (on demand)."""

from __future__ import annotations

import struct
import zlib

from sunk.runtime.local import portforward as pf


def test_the_dictionary_is_spdy_3_s() -> None:
    assert len(pf.DICTIONARY) == 1423
    assert pf.DICTIONARY.startswith(b"\x00\x00\x00\x07options\x00\x00\x00\x04head")
    assert pf.DICTIONARY.endswith(b"utf-,*,enq=0.")


def test_frames_are_cut_from_a_stream_arriving_in_pieces() -> None:
    ping = pf.control(pf.PING, 0, struct.pack(">I", 1))
    chunk = pf.data(5, pf.FLAG_FIN, b"hello")
    assert ping[:4] == b"\x80\x03\x00\x06" and chunk[:4] == b"\x00\x00\x00\x05" and chunk[4] == pf.FLAG_FIN
    buffer = bytearray(ping + chunk[:6])
    assert pf.frames(buffer) == [(True, pf.PING, 0, b"\x00\x00\x00\x01")]
    buffer += chunk[6:]
    assert pf.frames(buffer) == [(False, 5, pf.FLAG_FIN, b"hello")] and buffer == bytearray()


def test_header_blocks_go_through_the_primed_zlib_streams_and_names_are_lowercased() -> None:
    sender, receiver = zlib.compressobj(zdict=pf.DICTIONARY), zlib.decompressobj(zdict=pf.DICTIONARY)
    for headers in ({"Streamtype": "data", "Port": "8080", "Requestid": "0"}, {"Streamtype": "error", "Port": "8080"}):
        block = sender.compress(pf.header_block(headers)) + sender.flush(zlib.Z_SYNC_FLUSH)
        assert pf.parse_headers(receiver.decompress(block)) == {k.lower(): v for k, v in headers.items()}
