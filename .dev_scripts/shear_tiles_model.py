"""A model of the sheared tiles of .dev_scripts/mma_wgrad_shear_probe.cu (the tensor-core weight gradient of
diagonal lines), checked on the CPU: every output of the plane is listed by exactly one tile, and for each
listed output and each point of its block, the staged x piece that the kernel reads is the image pixel at
the point's offset and the staged dy piece is the output's own pixel.

    python .dev_scripts/shear_tiles_model.py [--cases 300] [--seed 0]

Each case draws a plane, K, 45 or 135 degrees, rounded or bilinear taps, angles moved by up to 0.05 rad
per channel, and a tile of rows x lines. The model mirrors the probe's index rules (block_points, the
tiles in run(), the copies' coordinates, row_lines, the pixel tables and the points' offsets): change it
with them. It needs no GPU.
"""
import argparse
import math
import random


def block_points(rng, k, angle, jitter, bilinear, channels=16):
    """The union of a block's channels' points (dh, dw), as the probe's block_points."""
    pts = set()
    for _ in range(channels):
        a = angle * math.pi / 180 + rng.uniform(-jitter, jitter)
        sn, cs = math.sin(a), math.cos(a)
        for t in range(k):
            d = t - k // 2
            if not bilinear:
                pts.add((math.trunc(-d * sn), math.trunc(d * cs)))
                continue
            py, px = -d * sn, d * cs
            fy, fx = math.floor(py), math.floor(px)
            for i in (0, 1):
                for j in (0, 1):
                    wy = py - fy if i else 1 - (py - fy)
                    wx = px - fx if j else 1 - (px - fx)
                    if wy * wx != 0:
                        pts.add((fy + i, fx + j))
    return sorted(pts)


def tiles_of(h, w, s, tv, tu):
    """Tiles (h0, nv, u0): rows [h0, h0 + nv), then the lines of those rows inside the image in runs of tu."""
    out = []
    for h0 in range(0, h, tv):
        nv = min(tv, h - h0)
        hl = h0 + nv - 1
        ulo, uhi = (h0, hl + w) if s > 0 else (-hl, w - h0)
        out += [(h0, nv, u0) for u0 in range(ulo, uhi, tu)]
    return out


def staged_pixel(piece, width, top, first, s):
    """The image pixel of a staged piece: row r of a tile of rows `width` pieces wide holds image row top + r
    from w = first - s (top + r), one bulk tensor copy (x: top = h0 - ra, first = u0 - pu; dy: h0, u0)."""
    r, col = divmod(piece, width)
    return top + r, first - s * (top + r) + col


def run_case(seed):
    """The number of wrong reads and listings of one random case."""
    rng = random.Random(seed)
    h, w = rng.randint(1, 60), rng.randint(1, 60)
    k = rng.choice([3, 7, 15, 31])
    angle = rng.choice([45.0, 135.0])
    bilinear = rng.random() < 0.7
    jitter = rng.choice([0.0, 0.05])
    tv, tu = rng.choice([8, 16, 24, 32, 64]), rng.choice([8, 16, 24, 32])
    s = 1 if angle < 90 else -1
    pts = block_points(rng, k, angle, jitter, bilinear)
    ra = max(abs(a) for a, _ in pts)
    pu = max(abs(b + s * a) for a, b in pts)
    bx = (tu + 2 * pu + 7) // 8 * 8
    listed, bad = {}, 0
    for h0, nv, u0 in tiles_of(h, w, s, tv, tu):
        rows = []
        for r in range(nv):
            lo, hi = max(u0, s * (h0 + r)), min(u0 + tu, s * (h0 + r) + w)
            rows.append((lo, max(0, hi - lo)))
        for r, (lo, count) in enumerate(rows):
            for e in range(count):
                u = lo + e - u0
                pix_s, pix_o = (r + ra) * bx + u + pu, r * tu + u
                out = staged_pixel(pix_o, tu, h0, u0, s)
                bad += not (0 <= out[0] < h and 0 <= out[1] < w) or out in listed
                listed[out] = True
                for a, b in pts:
                    piece = pix_s + a * bx + b + s * a
                    row, col = divmod(piece, bx)
                    inside = 0 <= row < nv + 2 * ra and 0 <= col < bx and col == (pix_s % bx) + b + s * a
                    bad += not inside or staged_pixel(piece, bx, h0 - ra, u0 - pu, s) != (out[0] + a, out[1] + b)
    return bad + (len(listed) != h * w)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--cases', type=int, default=300)
    parser.add_argument('--seed', type=int, default=0)
    args = parser.parse_args()
    failing = [s for s in range(args.seed, args.seed + args.cases) if run_case(s)]
    print(f'{args.cases} cases, {len(failing)} failing' + (f': seeds {failing[:10]}' if failing else ''))
    raise SystemExit(1 if failing else 0)


if __name__ == '__main__':
    main()
