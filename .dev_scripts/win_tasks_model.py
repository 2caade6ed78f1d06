"""A model of the window gather's addressing (csrc/cuda/win_gather/win_gather_kernel.cuh: win_tasks and
the tiles its callers stage), checked against a direct sum: every output the kernel stores must be
the zero-padded convolution of the plane, whatever the staged tile holds beyond what it stages.

    python .dev_scripts/win_tasks_model.py [--cases 2000] [--seed 0]

Each case draws a plane, one channel's segments along one axis (modes 0-3), the path, the number of
slots, and whether diagonal tasks come in pieces. The several-images path (SMALL, 16-bit) stages the
whole plane with a halo of at most OUTPUTS - 1 and its tasks near the border walk only the points
that read the plane for one of their outputs (CLIP); the sub-tile path stages a sub-tile anywhere in
the plane (or the whole plane) with the lines' halo, its last round of at most slots / OUTPUTS tasks
one output a slot (SPLIT_LAST). Zeros are staged outside the plane, NaN everywhere else. A stored
output that reads a NaN, differs from the direct sum, is written twice or not at all fails the case.

The model mirrors the kernel's index rules (seg_task, diag_piece, task_segment_points, the staged
halos): change it with them. It runs on the CPU in a few minutes and needs no GPU.
"""
import argparse
import random

import numpy as np

R = 4  # the 16-bit kernels' outputs per task (WinTraits::kOutputs)


def round_up(a, b):
    return (a + b - 1) // b * b


def mode_step(mode):
    return (0 if mode == 0 else 1), (0 if mode == 1 else (-1 if mode == 3 else 1))


def seg_ntasks(mode, th, tw):
    rb = round_up(th, R) // R
    return th * (round_up(tw, R) // R) if mode == 0 else (tw if mode == 1 else tw + R - 1) * rb


def seg_task(mode, k, th, tw):
    if mode == 0:
        cb = k // th
        return k - cb * th, cb * R
    if mode == 1:
        rb = k // tw
        return rb * R, k - rb * tw
    span = tw + R - 1
    rb, qq = divmod(k, span)
    return rb * R, (qq - (R - 1) if mode == 2 else qq)


def diag_npieces(th, tw):
    n, m = 0, 0
    while m < th and m < tw:
        n += th + tw - 1 - 2 * m
        m += R
    return n


def diag_piece(mode, k, th, tw):
    m, count = 0, th + tw - 1
    while k >= count:
        k -= count
        count -= 2 * R
        m += R
    d = m - th + 1 + k
    p, qd = max(0, -d) + m, max(0, d) + m
    return p, (qd if mode == 2 else tw - 1 - qd)


def task_segment_points(P, Q, dh, dw, ui, uj, L, SH, SW, n):
    """The points [l0, l1] of a segment that a task of n outputs from (P, Q) needs inside the plane."""
    lo, hi = 0, n + L - 2
    for x0, u, size in ((P + dh, ui, SH), (Q + dw, uj, SW)):
        if u == 0:
            if not 0 <= x0 < size:
                hi = -1
        elif u > 0:
            lo, hi = max(lo, -x0), min(hi, size - 1 - x0)
        else:
            lo, hi = max(lo, x0 - size + 1), min(hi, x0)
    return max(lo - (n - 1), 0), (min(hi, L - 1) if lo <= hi else -1)


def draw_segments(rng, ui, uj):
    segs, w0 = [], 0
    for _ in range(rng.randint(1, 5)):
        L, dh, dw = rng.randint(1, 8), rng.randint(-12, 12), rng.randint(-12, 12)
        if ui:
            dh = min(dh, 12 - (L - 1))
        if uj == 1:
            dw = min(dw, 12 - (L - 1))
        if uj == -1:
            dw = max(dw, -12 + (L - 1))
        segs.append((dh, dw, L, w0))
        w0 += L
    return segs, w0


def run_case(seed):
    """The number of stored outputs that are wrong, written twice or missing."""
    rng = random.Random(seed)
    H, W = rng.randint(1, 40), rng.randint(1, 40)
    mode = rng.randint(0, 3)
    ui, uj = mode_step(mode)
    segs, nw = draw_segments(rng, ui, uj)
    wts = np.random.default_rng(seed).standard_normal(nw)
    x = np.random.default_rng(seed + 1).standard_normal((H, W))
    pts = [(dh + i * ui, dw + i * uj, w + i) for dh, dw, L, w in segs for i in range(L)]
    ph, pw = max(abs(a) for a, _, _ in pts), max(abs(b) for _, b, _ in pts)
    small = rng.random() < 0.4  # the several-images path: the whole plane, CLIP
    if small or rng.random() < 0.2:
        ps, qs, sth, stw = 0, 0, H, W
    else:
        ps, qs = rng.randint(0, H - 1), rng.randint(0, W - 1)
        sth, stw = rng.randint(1, H - ps), rng.randint(1, W - qs)
    slots = rng.choice([64, 16, 8])
    top = bottom = min(ph, R - 1) if small else ph
    left = right = min(pw, R - 1) if small else pw
    rows = round_up(sth, R) + top + bottom
    cols = round_up(stw, R) + left + right + 2 * (R - 1)
    pitch = cols | 1
    pad = 3 * rows * pitch + 100
    tile = np.full(rows * pitch + 2 * pad, np.nan)
    for i in range(rows):
        for j in range(cols):
            gi, gj = ps + i - top, qs + j - left - (R - 1)
            tile[pad + i * pitch + j] = x[gi, gj] if 0 <= gi < H and 0 <= gj < W else 0.0
    step = ui * pitch + uj
    bad = 0
    for pieces in ((False, True) if mode >= 2 else (False, )):
        out = {}

        def task(t, r0, n, pieces=pieces, out=out):
            p, q = diag_piece(mode, t, sth, stw) if pieces else seg_task(mode, t, sth, stw)
            p, q = p + r0 * ui, q + r0 * uj
            b0 = pad + (p + top) * pitch + q + left + (R - 1)
            P, Q = ps + p, qs + q
            acc = np.zeros(n)
            inside = not small or (P >= ph and P + n - 1 + ph < H and Q >= n - 1 + pw and Q + n - 1 + pw < W)
            for dh, dw, L, w in segs:
                l0, count = 0, L
                if not inside:
                    l0, l1 = task_segment_points(P, Q, dh, dw, ui, uj, L, H, W, n)
                    if l1 < l0:
                        continue
                    count = l1 - l0 + 1
                base = b0 + dh * pitch + dw + l0 * step
                for k in range(n + count - 1):
                    a = base + k * step
                    v = tile[a] if 0 <= a < len(tile) else np.nan
                    for r in range(n):
                        if 0 <= k - r < count:
                            acc[r] += wts[w + l0 + k - r] * v
            for r in range(n):
                pr, qr = p + r * ui, q + r * uj
                if pr < sth and 0 <= qr < stw:
                    out[(pr, qr)] = np.nan if (pr, qr) in out else acc[r]

        total = diag_npieces(sth, stw) if pieces else seg_ntasks(mode, sth, stw)
        last = total % slots
        split = not small and last > 0 and last * R <= slots
        whole = total - last if split else total
        for t in range(whole):
            task(t, 0, R)
        if split:
            for s in range(last * R):
                task(whole + s // R, s % R, 1)
        for pr in range(sth):
            for qr in range(stw):
                gr, gc = ps + pr, qs + qr
                ref = sum(wts[c] * x[gr + a, gc + b] for a, b, c in pts if 0 <= gr + a < H and 0 <= gc + b < W)
                v = out.get((pr, qr), np.nan)
                bad += not (np.isfinite(v) and abs(v - ref) <= 1e-9 * (1 + abs(ref)))
    return bad


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--cases', type=int, default=2000)
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args()
    failing = [s for s in range(args.seed, args.seed + args.cases) if run_case(s)]
    print(f'{args.cases} cases, {len(failing)} failing' + (f': seeds {failing[:10]}' if failing else ''))
    raise SystemExit(1 if failing else 0)


if __name__ == '__main__':
    main()
