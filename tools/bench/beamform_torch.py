"""PyTorch peer of `sonopipe-bench beamform`: delay-and-sum written the natural way in PyTorch
(delays for every (transmit, element, pixel), one gather from the channel data, linear interpolation,
apodisation and carrier phase, sum), on the same cases and geometry, timed with CUDA events (median).

    python3 tools/bench/beamform_torch.py [--repeats 20]

Needs PyTorch with CUDA (the device machine has it); prints one line per case.
"""
import argparse
import math

import torch


def plane_wave_case(iq, samples=2048, elements=128, pitch=0.3e-3, f0=5.208e6, c=1540.0):
    fs = 2 * f0 if iq else 4 * f0
    angles = torch.linspace(-16, 16, 11, dtype=torch.float64) * math.pi / 180
    xe = (torch.arange(elements, dtype=torch.float64) - (elements - 1) / 2) * pitch
    x = torch.linspace(-19e-3, 19e-3, 256, dtype=torch.float64)
    z = torch.linspace(5e-3, 50e-3, 1024, dtype=torch.float64)
    X, Z = torch.meshgrid(x, z, indexing="ij")
    return dict(iq=iq, fs=fs, f0=f0, c=c, xe=xe, angles=angles, X=X.reshape(-1), Z=Z.reshape(-1),
                samples=samples, f_number=1.5)


def das(data, case):
    """data [T, E, S] (complex64 or float32, on the GPU) -> image [P]."""
    device = data.device
    X, Z = case["X"].to(device, torch.float32), case["Z"].to(device, torch.float32)
    xe = case["xe"].to(device, torch.float32)
    angles = case["angles"].to(device, torch.float32)
    c, fs = case["c"], case["fs"]
    tx = (X[None, :] * torch.sin(angles)[:, None] + Z[None, :] * torch.cos(angles)[:, None]) / c   # [T, P]
    dx = X[None, :] - xe[:, None]                                                                    # [E, P]
    rx = torch.sqrt(dx * dx + Z[None, :] ** 2) / c                                                   # [E, P]
    r = dx.abs() / (Z[None, :] / (2 * case["f_number"]))
    weight = torch.where(r <= 1, 0.5 * (1 + torch.cos(math.pi * r)), torch.zeros_like(r))            # Hann
    tau = tx[:, None, :] + rx[None, :, :]                                                            # [T, E, P]
    position = tau * fs
    index = position.floor().clamp(0, case["samples"] - 2)
    frac = (position - index)
    valid = (position >= 0) & (position <= case["samples"] - 1)
    index = index.long()
    T, E, P = tau.shape
    lo = torch.gather(data, 2, index)
    hi = torch.gather(data, 2, index + 1)
    value = lo * (1 - frac) + hi * frac
    value = torch.where(valid, value, torch.zeros_like(value))
    if case["iq"]:
        value = value * torch.exp(1j * (2 * math.pi * case["f0"]) * tau)
    return (value * weight[None, :, :]).sum(dim=(0, 1))


def time_ms(fn, repeats):
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for r in range(repeats + 3):
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        if r >= 3:
            times.append(start.elapsed_time(stop))
    times.sort()
    return times[len(times) // 2]


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    device = torch.device("cuda")
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    for name, iq in (("picmus-iq-linear", True), ("picmus-rf-linear", False)):
        case = plane_wave_case(iq)
        generator = torch.Generator(device=device).manual_seed(1)
        shape = (11, 128, case["samples"])
        if iq:
            data = torch.complex(torch.randn(shape, device=device, generator=generator),
                                 torch.randn(shape, device=device, generator=generator))
        else:
            data = torch.randn(shape, device=device, generator=generator)
        ms = time_ms(lambda: das(data, case), args.repeats)
        print(f"torch {name:22s} {ms:9.3f} ms  {1e3 / ms:8.0f} frames/s")


if __name__ == "__main__":
    main()
