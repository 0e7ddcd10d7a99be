"""B-mode image of an RF frame: envelope by the analytic signal along depth, log-compressed."""
import numpy as np


def envelope(rf, axis):
    """|analytic signal| of real `rf` along `axis` (FFT Hilbert transform, as scipy.signal.hilbert)."""
    rf = np.asarray(rf, dtype=np.float64)
    n = rf.shape[axis]
    spectrum = np.fft.fft(rf, axis=axis)
    weights = np.zeros(n)
    weights[0] = 1.0
    if n % 2 == 0:
        weights[n // 2] = 1.0
        weights[1:n // 2] = 2.0
    else:
        weights[1:(n + 1) // 2] = 2.0
    shape = [1] * rf.ndim
    shape[axis] = n
    return np.abs(np.fft.ifft(spectrum * weights.reshape(shape), axis=axis))


def log_compress(envelope_values, dynamic_range_db=50.0):
    """dB relative to the maximum, clipped to -dynamic_range_db .. 0."""
    peak = float(np.max(envelope_values)) if envelope_values.size else 0.0
    if peak <= 0:
        return np.full(envelope_values.shape, -dynamic_range_db)
    db = 20 * np.log10(np.maximum(envelope_values / peak, 1e-12))
    return np.clip(db, -dynamic_range_db, 0.0)
