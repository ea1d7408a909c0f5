"""What sealing and opening a chunk share between the two-pass loop (_aead) and the stitched loops (_stitched).

A chunk's bounds and nonce in its batch, its Poly1305 key and the MAC's
start, the MAC's end on vector lanes (in the split form with the next
chunk's key beside them, _next_key) or on the scalar accumulator, and the
constant-time check of its tag. Kernels here take typed arrays and never
raise on user input.
"""

import numpy as np

from ._common import _fill, _inner, _put_le64, _verdict, CHUNK, GROUP, LANE_MIN, LANES, TAG
from ._chacha20 import _age_nonce, _chacha_xor_256
from ._next_key import _lanes_beside_key, POWERS_AT
from ._poly1305 import _poly_begin, _poly_blocks, _poly_fold, _poly_lanes, _poly_tag, _poly_zero_padded, _put_limbs


@_inner
def _lane_groups(n):
    """The 16-lane groups Poly1305 hashes of n ciphertext bytes on vector lanes (none below LANE_MIN)."""
    return n // GROUP if n >= LANE_MIN else 0


@_inner
def _key(scr, aad, lanes):
    """The chunk's Poly1305 key into ctx (scr[1]), with the lanes' powers of r where `lanes`, and aad
    absorbed; leaves the ChaCha20 counter at 1.

    The key is the first 32 bytes of ChaCha20 block 0, made with blocks 1-3
    in 128-bit vectors from the zeros at buf[0:256] into buf[1024:1280]: a
    whole 16-block call, or an iteration of the stitched loop, for it cost
    ~0.25 us more of a 64 KiB chunk (benchmarks/HISTORY.md).
    """
    st, ctx, hl, pw16, pwfin, buf = scr[:6]
    st[12] = 0
    _chacha_xor_256(st, buf, 0, buf, 1024)
    st[12] = 1
    _poly_begin(ctx, hl, pw16, pwfin, buf, 1024, lanes)
    _poly_zero_padded(ctx, aad, buf[2064:2080])


@_inner
def _mac_begin(scr, aad, n):
    """_key for a message of n ciphertext bytes; returns the number of 16-lane groups its MAC has."""
    groups = _lane_groups(n)
    _key(scr, aad, groups > 0)
    return groups


@_inner
def _mac_end(scr, ct, groups, aadlen, ctlen, out, ooff):
    """MAC ct, the last bytes of ctlen, from the accumulator in ctx: `groups`
    16-lane groups of it on the lanes (their powers made by _poly_begin),
    then the rest; tag to out[ooff:ooff+16]."""
    ctx, hl, pw16 = scr[1], scr[2], scr[3]
    if groups:
        # the running sum so far joins the first block of lane 0
        _put_limbs(hl, LANES, 0, ctx[4], ctx[5], ctx[6])
        if groups > 1:
            _poly_lanes(hl, pw16, ct, 0, groups - 1)
        _last_group(scr, ct, groups)
    _mac_finish(scr, ct[GROUP * groups:], aadlen, ctlen, out, ooff)


@_inner
def _mac_end_beside_key(scr, ct, groups, aadlen, ctlen, out, ooff, nonce, join):
    """_mac_end for more than _next_key.BESIDE groups on IFMA lanes, with the Poly1305 key of the chunk
    whose nonce is `nonce` made beside them into the scratch's next-key words (r^join for its chains)."""
    st, ctx, hl, pw16, pwfin, buf, nk = scr
    _put_limbs(hl, LANES, 0, ctx[4], ctx[5], ctx[6])
    _lanes_beside_key(hl, pw16, ct, 0, groups - 1, st, nonce, nk, join)
    _last_group(scr, ct, groups)
    _mac_finish(scr, ct[GROUP * groups:], aadlen, ctlen, out, ooff)


@_inner
def _last_group(scr, ct, groups):
    """The lanes' last group, each lane by its own power r^(16-l), and their sum into ctx's accumulator."""
    ctx, hl, pwfin = scr[1], scr[2], scr[4]
    _poly_lanes(hl, pwfin, ct, GROUP * (groups - 1), 1)
    _poly_fold(ctx, hl)


@_inner
def _take_key(scr, aad):
    """The key _mac_end_beside_key made for this chunk, as _key would leave it: r, s and r^join into ctx,
    the lanes' powers into pw16 (r^16 in every lane) and pwfin, the lanes zeroed, aad absorbed and the
    ChaCha20 counter at 1."""
    st, ctx, hl, pw16, pwfin, buf, nk = scr
    for i in range(4):
        ctx[i] = nk[i]
    for i in range(3):
        ctx[4 + i] = 0
        ctx[7 + i] = nk[4 + i]
    for row in range(5):
        at = POWERS_AT + LANES * row
        for lane in range(LANES):
            pwfin[LANES * row + lane] = nk[at + lane]
            pw16[LANES * row + lane] = nk[at]
    _fill(hl, hl.size, np.uint64(0))
    _poly_zero_padded(ctx, aad, buf[2064:2080])
    st[12] = 1


@_inner
def _mac_finish(scr, rest, aadlen, ctlen, out, ooff):
    """Absorb the last ciphertext bytes `rest` (zero-padded) and the lengths; tag to out[ooff:ooff+16]."""
    ctx, blk = scr[1], scr[5][2064:2080]
    _poly_zero_padded(ctx, rest, blk)
    _put_le64(blk, 0, np.uint64(aadlen))
    _put_le64(blk, 8, np.uint64(ctlen))
    _poly_blocks(ctx, blk, 0, 1, 1)
    _poly_tag(ctx, out, ooff)


@_inner
def _tag_matches(tag, at, sealed, n):
    """Whether tag[at:at+16] equals sealed[n:n+16], compared in constant time (an OR of XORs, _verdict)."""
    diff = np.uint8(0)
    for i in range(TAG):
        diff |= tag[at + i] ^ sealed[n + i]
    return _verdict(diff)


@_inner
def _seal_bounds(counter, i, n, final, mask):
    """Chunk i of a batch of n plaintext bytes to seal: its bounds in the plaintext, whether it is the
    batch's last, and its nonce's words (flag 1 on the last chunk of a final batch; XOR mask)."""
    pos = i * CHUNK
    end = min(pos + CHUNK, n)
    last = end == n
    return pos, end, last, _age_nonce(np.uint64(counter) + np.uint64(i), 1 if (last and final) else 0, mask)


@_inner
def _seal_chunk(st, mask, counter, i, n, final):
    """_seal_bounds' bounds of chunk i, its nonce set in st."""
    pos, end, last, nonce = _seal_bounds(counter, i, n, final, mask)
    st[13], st[14], st[15] = nonce
    return pos, end, last


@_inner
def _open_bounds(counter, i, pos, n, final, mask):
    """Chunk i of a batch of n sealed bytes to open, starting at pos: where it ends, and its nonce's words
    (as _seal_bounds': flag 1 where it ends the batch and the batch is final)."""
    end = min(pos + CHUNK + TAG, n)
    return end, _age_nonce(np.uint64(counter) + np.uint64(i), 1 if (end == n and final) else 0, mask)
