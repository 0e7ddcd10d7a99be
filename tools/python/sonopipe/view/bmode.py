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


BEAMFORMED_SUFFIXES = ("beamformed", "bmode", "mean")  # output names of beamformed images
MEAN_OF_FRAMES_ATTRIBUTE = "mean_of_frames"  # stages/doppler/doppler_conventions.h kMeanOfFramesAttribute


def is_beamformed(output_name):
    """An output holding a beamformed image (the beamform stage's "beamformed", with or without a
    stage prefix; "bmode"/"mean" for a stage that publishes the image itself)."""
    return output_name.endswith(BEAMFORMED_SUFFIXES)


def image_db(array, axes, unit="", dynamic_range_db=50.0, attributes=None):
    """(dB [depth, lateral], rows Axis, columns Axis, what) of a beamformed image or raw RF frame.
    A "frame" axis (an ensemble) is reduced to the mean frame: coherent mean of complex IQ, mean
    magnitude of real data. Complex: |IQ|; real: the envelope along depth; unit "dB": as it is,
    relative to its maximum (the mean_bmode stage's output: its header attribute mean_of_frames
    names the frames it averaged). Other axes beyond two at their middle index (panels.plane)."""
    from sonopipe.view import panels, units  # here: panels and units need no B-mode
    array = np.asarray(array)
    axes = list(axes)
    what = "B-mode"
    averaged = (attributes or {}).get(MEAN_OF_FRAMES_ATTRIBUTE, "")
    if unit == "dB" and averaged.isdigit():
        what = f"B-mode of the mean frame ({averaged} frames)"
    frame = units.find_axis(axes, ("frame",))
    if frame is not None and len(axes) > 2:
        what = f"B-mode of the mean frame ({axes[frame].size} frames)"
        array = array.mean(axis=frame) if np.iscomplexobj(array) else np.abs(array).mean(axis=frame)
        axes.pop(frame)
    values, rows, columns = panels.plane(array, axes, units.DEPTH_NAMES, units.LATERAL_NAMES)
    if unit == "dB":
        values = np.asarray(values, np.float64)
        finite = values[np.isfinite(values)]
        image = np.clip(values - (finite.max() if finite.size else 0.0), -dynamic_range_db, 0.0)
    elif np.iscomplexobj(values):
        image = log_compress(np.abs(values), dynamic_range_db)
    else:
        image = log_compress(envelope(values, axis=0), dynamic_range_db)
    return image, rows, columns, what
