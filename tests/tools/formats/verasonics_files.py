"""Writes small Verasonics workspace saves (.mat) for verasonics_test.cpp, with writers that share
no code with sonopipe: scipy.io.savemat for MAT v5 and h5py for MATLAB's v7.3 layout.

    verasonics_files.py SCENARIO FORMAT PATH SEED
      SCENARIO  plane | focused | bad:<what> (a plane file with one defect)
                | timed | timed:<variant> (11 plane waves, 4 frames, an Event/SeqControl sequence)
      FORMAT    v5 | v5z (compressed) | v73
    verasonics_files.py --serve
      the same, one request "SCENARIO FORMAT PATH SEED" per line of stdin, answered "ok" or
      "error: <reason>" on one line of stdout (verasonics_test.cpp starts Python and imports numpy,
      scipy and h5py once instead of once per file)

Channel samples follow one formula that the C++ half repeats to know the truth:
    RcvData{b}(row, channel, frame) = int16(((row * 7 + channel * 131 + frame * 1009 + b * 17 + seed) % 65536) - 32768)
with 1-based row, channel, frame and buffer b as MATLAB indexes them. IQData{1}(z, x, 1, frame) =
complex(z + 10 x + 100 frame, -(z + x)); ImgData{1}(z, x, 1, frame) = z * x + frame (1-based).

MATLAB v7.3 as MATLAB writes it: an HDF5 file with a 512-byte user block whose first 128 bytes are
the MAT header ("MATLAB 7.3 MAT-file", version 0x0200, endian "IM"); every variable's dimensions
reversed; a MATLAB_class attribute on each dataset and group; a 1x1 struct as a group with a
MATLAB_fields attribute; a struct array as a group whose fields are datasets of object references
(one per element, into /#refs#); a cell array as a dataset of object references; char arrays as
uint16 with MATLAB_int_decode = 2; complex numbers as a compound {real, imag}.
"""
import sys

import numpy as np


class Cell(list):
    """A MATLAB 1xN cell array."""


class StructArray(list):
    """A MATLAB 1xN struct array (a list of dicts with the same keys)."""


EMPTY = np.zeros((0, 0))  # MATLAB's [], e.g. an unset SeqControl.argument


def rcv_value(row, channel, frame, buffer, seed):
    return (((row * 7 + channel * 131 + frame * 1009 + buffer * 17 + seed) % 65536) - 32768).astype(np.int16)


def rcv_buffer(rows, channels, frames, buffer, seed):
    r, c, f = np.meshgrid(np.arange(1, rows + 1, dtype=np.int64), np.arange(1, channels + 1, dtype=np.int64),
                          np.arange(1, frames + 1, dtype=np.int64), indexing="ij")
    return rcv_value(r, c, f, buffer, seed)


def plane_wave_delays(x_m, angle_rad, apodization, wavelength_m):
    """TX.Delay as Verasonics' computeTXDelays makes them for a plane wave steered by theta: the
    element at x fires x sin(theta) / c later than one at x = 0, shifted so that the earliest
    firing element fires at 0; elements that do not fire get 0; in wavelengths."""
    d = x_m * np.sin(angle_rad) / wavelength_m
    active = apodization > 0
    return np.where(active, d - d[active].min(), 0.0)


def spherical_delays(x_m, source_x_m, source_z_m, wavelength_m):
    """Delays (wavelengths, earliest 0) of a wave focused at (x_s, z_s > 0) or diverging from a
    virtual source behind the array (z_s < 0)."""
    r = np.sqrt((x_m - source_x_m) ** 2 + source_z_m ** 2)
    d = (r.max() - r) if source_z_m > 0 else (r - r.min())
    d = d / wavelength_m
    return d - d.min()


# SeqControl of the "timed" scenario, 1-based as Events refer to them. Verasonics units:
# timeToNextAcq in microseconds from the start of one acquisition to the start of the next, noop in
# 200 ns steps, jump to an Event number.
JUMP, TTNA_WAVE, TTNA_FRAME, TRANSFER, RETURN, PROFILE, CHARGE, EXTRA = 1, 2, 3, 4, 5, 6, 7, 8
TIMED_WAVES, TIMED_FRAMES = 11, 4


def timed_sequence(variant):
    """Events and SeqControl of the "timed" scenario. Base: event 1 is a preamble (TPC profile,
    100 ms noop) outside the loop; per frame 11 acquisitions 200 us apart, the 11th with a frame-level
    timeToNextAcq of 10 ms and a transfer, then an event returning to MATLAB; the last event jumps
    back to event 2. Programmed frame period: 10 x 200 us + 10 ms = 12 ms."""
    controls = [dict(command="jump", argument=2.0),
                dict(command="timeToNextAcq", argument=200.0),
                dict(command="timeToNextAcq", argument=10000.0),
                dict(command="transferToHost", argument=EMPTY),
                dict(command="returnToMatlab", argument=EMPTY),
                dict(command="setTPCProfile", argument=1.0),
                dict(command="noop", argument=500000.0)]  # 100 ms
    events = [dict(tx=0.0, rcv=0.0, seqControl=np.array([[PROFILE, CHARGE]], dtype=float))]
    for f in range(1, TIMED_FRAMES + 1):
        for k in range(1, TIMED_WAVES + 1):
            last = k == TIMED_WAVES
            sequence = [TTNA_FRAME, TRANSFER] if last else [TTNA_WAVE]
            if variant == "varying" and last and f == 1:
                sequence = [EXTRA, TRANSFER]  # frame 1 -> 2: 10 x 200 us + 20 ms
            if variant == "no_ttna" and last:
                sequence = [TRANSFER]
            if variant == "trigger_in" and k == 1:
                sequence = [TTNA_WAVE, EXTRA]
            if variant == "control_range" and k == 1 and f == 2:
                sequence = [TTNA_WAVE, 99]
            events.append(dict(tx=float(k), rcv=float((f - 1) * TIMED_WAVES + k),
                               seqControl=np.array([sequence], dtype=float)))
        events.append(dict(tx=0.0, rcv=0.0, seqControl=np.array([[RETURN]], dtype=float)))
        if variant == "noop":  # a 10 ms noop and a sync with the host after each frame
            events.append(dict(tx=0.0, rcv=0.0, seqControl=np.array([[EXTRA, EXTRA + 1]], dtype=float)))
    events.append(dict(tx=0.0, rcv=0.0, seqControl=np.array([[JUMP]], dtype=float)))
    if variant == "noop":
        controls[TTNA_FRAME - 1]["argument"] = 200.0
        controls += [dict(command="noop", argument=50000.0), dict(command="sync", argument=10e6)]
    elif variant == "varying":
        controls.append(dict(command="timeToNextAcq", argument=20000.0))
    elif variant == "trigger_in":
        controls.append(dict(command="triggerIn", argument=EMPTY))
    elif variant == "negative":
        controls[TTNA_WAVE - 1]["argument"] = -200.0
    elif variant == "huge":
        controls[TTNA_WAVE - 1]["argument"] = 1e300
    elif variant == "missing":
        controls[TTNA_WAVE - 1]["argument"] = EMPTY
    elif variant == "text":
        controls[TTNA_WAVE - 1]["argument"] = "fast"
    elif variant == "jump_range":
        controls[JUMP - 1]["argument"] = 1000.0
    elif variant == "rcv_range":
        events[0]["rcv"] = 9999.0
    elif variant not in ("", "no_ttna", "control_range", "no_seqcontrol"):
        raise SystemExit("unknown timed variant " + variant)
    return events, (None if variant == "no_seqcontrol" else controls)


def scenario(name, seed):
    c = 1540.0
    f_mhz = 5.208
    wavelength = c / (f_mhz * 1e6)
    elements = 8
    pitch_mm = 0.3
    x_mm = (np.arange(elements) - (elements - 1) / 2) * pitch_mm
    x_m = x_mm * 1e-3
    ws = {}
    controls = None
    if name == "timed" or name.startswith("timed:"):
        frames, last_frame, stride, samples = TIMED_FRAMES, 2, 64, 50
        rows = TIMED_WAVES * stride
        units = "mm"
        element_pos = np.column_stack([x_mm, np.zeros(elements), np.zeros(elements)])
        connector = np.arange(1, elements + 1).astype(float)
        channels = elements
        apod = np.ones(elements)
        txs = [dict(waveform=1.0, Origin=np.array([[0.0, 0.0, 0.0]]), focus=0.0, Steer=np.array([[a, 0.0]]),
                    Apod=apod[None, :], Delay=plane_wave_delays(x_m, a, apod, wavelength)[None, :])
               for a in np.linspace(-0.1, 0.1, TIMED_WAVES)]
        # Only fields the reader uses: libmatio's v7.3 reading time grows with the square of the
        # struct elements (docs/formats.md, "Known limits"), and this file has many receives.
        receives = [dict(startSample=float((k - 1) * stride + 1), endSample=float((k - 1) * stride + samples),
                         framenum=float(f), mode=0.0, startDepth=2.0, decimSampleRate=4 * f_mhz)
                    for f in range(1, frames + 1) for k in range(1, TIMED_WAVES + 1)]
        events, controls = timed_sequence(name[len("timed:"):] if ":" in name else "")
        lens = 0.0
    elif name == "plane":
        angles = [-0.1, 0.0, 0.15]
        frames, last_frame, rows, stride, samples = 4, 2, 3 * 64 + 40, 64, 50
        units = "mm"
        element_pos = np.column_stack([x_mm, np.zeros(elements), np.zeros(elements), np.zeros(elements)])
        connector = np.arange(elements, 0, -1).astype(float)  # element e on channel elements + 1 - e
        channels = elements
        # The last wave fires elements 1..5 only: an aperture asymmetric about the centre, where a
        # wrong angle sign in the reader's timing cannot cancel out.
        apods = [np.ones(elements), np.ones(elements), (np.arange(elements) < 5).astype(float)]
        txs = [dict(waveform=1.0, Origin=np.array([[0.0, 0.0, 0.0]]), focus=0.0, Steer=np.array([[a, 0.0]]),
                    Apod=apod[None, :], Delay=plane_wave_delays(x_m, a, apod, wavelength)[None, :])
               for a, apod in zip(angles, apods)]
        # One pulse-inversion partner (mode 1) accumulated onto acquisition 2 of each frame.
        txs.append(dict(txs[1]))
        receives = []
        for f in range(1, frames + 1):
            for k in range(1, 4):
                receives.append(dict(startSample=float((k - 1) * stride + 1), endSample=float((k - 1) * stride + samples),
                                     framenum=float(f), acqNum=float(k), mode=0.0, bufnum=1.0, startDepth=2.0,
                                     endDepth=30.0))
            receives.append(dict(startSample=float(stride + 1), endSample=float(stride + samples), framenum=float(f),
                                 acqNum=2.0, mode=1.0, bufnum=1.0, startDepth=2.0, endDepth=30.0))
        for r in receives:
            r.update(demodFrequency=f_mhz, decimSampleRate=4 * f_mhz, quadDecim=2.0, samplesPerWave=2.0,
                     sampleMode="NS200BW")
        events = []
        for i, r in enumerate(receives):
            k = int(r["acqNum"])
            tx = 4 if r["mode"] == 1.0 else k
            events.append(dict(tx=float(tx), rcv=float(i + 1)))
        lens = 0.8  # in Trans.units (mm here)
    elif name == "focused":
        frames, last_frame, rows, stride, samples = 3, 3, 4 * 80, 80, 80
        units = "wavelengths"
        element_pos = np.column_stack([x_m / wavelength, np.zeros(elements), np.zeros(elements), np.zeros(elements)])
        connector = np.arange(1, elements + 1).astype(float)
        channels = elements + 4  # a system with more channels than the probe has elements
        # Focused lines at three origins (focus 40 wavelengths), then one diverging wave (-20).
        origins = [-0.6, 0.0, 0.6, 0.0]
        foci = [40.0, 40.0, 40.0, -20.0]
        steers = [0.0, 0.0, 0.0, 0.1]
        txs = []
        for ox, fz, st in zip(origins, foci, steers):
            src_x = (ox + fz * np.sin(st)) * wavelength
            src_z = fz * np.cos(st) * wavelength
            txs.append(dict(waveform=1.0, Origin=np.array([[ox, 0.0, 0.0]]), focus=fz, Steer=np.array([[st, 0.0]]),
                            Apod=np.ones((1, elements)), Delay=spherical_delays(x_m, src_x, src_z, wavelength)[None, :]))
        receives = []
        for f in range(1, frames + 1):
            for k in range(1, 5):
                receives.append(dict(startSample=float((k - 1) * stride + 1), endSample=float((k - 1) * stride + samples),
                                     framenum=float(f), acqNum=float(k), mode=0.0, bufnum=1.0, startDepth=0.0,
                                     endDepth=40.0, demodFrequency=f_mhz, decimSampleRate=4 * f_mhz, quadDecim=1.0,
                                     samplesPerWave=4.0, sampleMode="NS200BW"))
        events = None  # no Event structure: acquisition k uses TX(k)
        lens = 0.5  # wavelengths
    else:
        raise SystemExit("unknown scenario " + name)

    ws["Trans"] = dict(name="L-test", units=units, frequency=f_mhz, numelements=float(elements),
                       ElementPos=element_pos, lensCorrection=lens, Connector=connector[:, None])
    ws["Resource"] = dict(Parameters=dict(speedOfSound=c, numRcvChannels=float(channels)),
                          RcvBuffer=StructArray([dict(datatype="int16", rowsPerFrame=float(rows),
                                                      colsPerFrame=float(channels), numFrames=float(frames),
                                                      lastFrame=float(last_frame))]))
    ws["TW"] = StructArray([dict(type="parametric", peak=1.5)])
    ws["TX"] = StructArray(txs)
    ws["Receive"] = StructArray(receives)
    if events is not None:
        ws["Event"] = StructArray(events)
    if controls is not None:
        ws["SeqControl"] = StructArray(controls)
    ws["RcvData"] = Cell([rcv_buffer(rows, channels, frames, 1, seed)])
    if name == "plane":
        z, x, fr = np.meshgrid(np.arange(1, 7), np.arange(1, 6), np.arange(1, 3), indexing="ij")
        iq = (z + 10 * x + 100 * fr) - 1j * (z + x)
        ws["IQData"] = Cell([iq[:, :, None, :].astype(np.complex128)])
        ws["ImgData"] = Cell([(z * x + fr)[:, :, None, :].astype(np.float64)])
        ws["PData"] = dict(PDelta=np.array([[0.5, 0.0, 0.25]]), Origin=np.array([[-1.0, 0.0, 3.0]]),
                           Size=np.array([[6.0, 5.0, 1.0]]))
    return ws


def corrupt(ws, what, seed):
    """bad:<what>: one defect per file, named by the error the reader must give."""
    if what == "no_receive":
        del ws["Receive"]
    elif what == "rank":  # RcvData{1} of rank 2 with the wrong channel count
        ws["RcvData"] = Cell([np.zeros((10, 3), np.int16)])
    elif what == "end_sample":
        ws["Receive"][0]["endSample"] = 10_000.0
    elif what == "rcv_type":
        ws["RcvData"] = Cell([ws["RcvData"][0].astype(np.float64)])
    elif what == "speed":
        del ws["Resource"]["Parameters"]["speedOfSound"]
    elif what == "units":
        ws["Trans"]["units"] = "inches"
    elif what == "last_frame":
        ws["Resource"]["RcvBuffer"][0]["lastFrame"] = 99.0
    elif what == "baseband":  # interleaved baseband samples, which the reader refuses
        for r in ws["Receive"]:
            r["sampleMode"] = "BS100BW"
    elif what == "layout":  # frame 2's first two acquisitions swap their rows
        second = [r for r in ws["Receive"] if r["framenum"] == 2.0 and r["mode"] == 0.0]
        for key in ("startSample", "endSample"):
            second[0][key], second[1][key] = second[1][key], second[0][key]
    elif what == "hvmux":  # a multiplexed probe: two apertures of element -> channel
        ws["Trans"]["HVMux"] = dict(Aperture=np.column_stack([np.arange(1.0, 9.0), np.arange(2.0, 10.0)]))
    elif what == "tx_delay_short":  # an aperture-relative Delay, shorter than the element count
        ws["TX"][0]["Delay"] = ws["TX"][0]["Delay"][:, :6]
    elif what == "no_verasonics":
        ws = {"x": np.ones((2, 2))}
    else:
        raise SystemExit("unknown defect " + what)
    return ws


# ---------------------------------------------------------------- MAT v5 through scipy


def to_scipy(value):
    if isinstance(value, StructArray):
        keys = list(value[0].keys())
        array = np.empty((1, len(value)), dtype=[(k, object) for k in keys])
        for i, element in enumerate(value):
            for k in keys:
                array[0, i][k] = to_scipy(element[k])
        return array
    if isinstance(value, Cell):
        array = np.empty((1, len(value)), dtype=object)
        for i, element in enumerate(value):
            array[0, i] = to_scipy(element)
        return array
    if isinstance(value, dict):
        return {k: to_scipy(v) for k, v in value.items()}
    return value


def write_v5(path, ws, compress):
    import scipy.io
    scipy.io.savemat(path, {k: to_scipy(v) for k, v in ws.items()}, format="5", do_compression=compress,
                     oned_as="row")


# ---------------------------------------------------------------- MATLAB v7.3 through h5py


def matlab_class(array):
    return {np.dtype(np.float64): "double", np.dtype(np.float32): "single", np.dtype(np.int16): "int16",
            np.dtype(np.complex128): "double", np.dtype(np.uint8): "uint8"}[array.dtype]


def write_h5_value(h5, parent, name, value, refs):
    import h5py
    if isinstance(value, (StructArray, Cell)):
        if isinstance(value, StructArray):
            group = parent.create_group(name)
            set_class(group, "struct")
            keys = list(value[0].keys())
            for k in keys:
                references = np.empty((len(value), 1), dtype=h5py.ref_dtype)  # 1xN reversed
                for i, element in enumerate(value):
                    references[i, 0] = write_h5_value(h5, refs, new_ref_name(refs), element[k], refs).ref
                group.create_dataset(k, data=references)
            set_fields(group, keys)
            return group
        references = np.empty((len(value), 1), dtype=h5py.ref_dtype)
        for i, element in enumerate(value):
            references[i, 0] = write_h5_value(h5, refs, new_ref_name(refs), element, refs).ref
        dataset = parent.create_dataset(name, data=references)
        set_class(dataset, "cell")
        return dataset
    if isinstance(value, dict):
        group = parent.create_group(name)
        set_class(group, "struct")
        for k, v in value.items():
            write_h5_value(h5, group, k, v, refs)
        set_fields(group, list(value.keys()))
        return group
    if isinstance(value, str):
        codes = np.array([[ord(ch) for ch in value]], dtype=np.uint16)  # 1xN
        dataset = parent.create_dataset(name, data=codes.T)
        set_class(dataset, "char")
        dataset.attrs["MATLAB_int_decode"] = np.int32(2)
        return dataset
    array = np.asarray(value)
    if array.size == 0:  # MATLAB writes [] as its dimensions, flagged MATLAB_empty
        dataset = parent.create_dataset(name, data=np.array(array.shape, dtype=np.uint64))
        set_class(dataset, "double")
        dataset.attrs["MATLAB_empty"] = np.uint8(1)
        return dataset
    if array.ndim == 0:
        array = array.reshape(1, 1)
    elif array.ndim == 1:
        array = array[None, :]
    stored = np.ascontiguousarray(array.T)  # MATLAB's column-major dims, reversed in HDF5
    if np.iscomplexobj(stored):
        compound = np.empty(stored.shape, dtype=[("real", np.float64), ("imag", np.float64)])
        compound["real"] = stored.real
        compound["imag"] = stored.imag
        stored = compound
    dataset = parent.create_dataset(name, data=stored)
    set_class(dataset, matlab_class(array))
    return dataset


def set_class(node, name):
    """MATLAB_class as MATLAB writes it: a fixed-length, null-terminated string (a null-padded one,
    h5py's default, reads back truncated through libmatio)."""
    import h5py
    string_type = h5py.h5t.C_S1.copy()
    string_type.set_size(len(name))
    string_type.set_strpad(h5py.h5t.STR_NULLTERM)
    attribute = h5py.h5a.create(node.id, b"MATLAB_class", string_type, h5py.h5s.create(h5py.h5s.SCALAR))
    attribute.write(np.array(name.encode(), dtype="S%d" % len(name)), mtype=string_type)


def new_ref_name(refs):
    return "r%d" % len(refs)  # MATLAB names them a, b, ...; any unique name is read alike


def set_fields(group, keys):
    import h5py
    vlen = h5py.vlen_dtype(np.dtype("S1"))
    names = np.empty(len(keys), dtype=vlen)
    for i, k in enumerate(keys):
        names[i] = np.array(list(k), dtype="S1")
    group.attrs.create("MATLAB_fields", names, dtype=vlen)


def write_v73(path, ws):
    import h5py
    with h5py.File(path, "w", userblock_size=512, libver="earliest") as h5:
        refs = h5.create_group("#refs#")
        for name, value in ws.items():
            write_h5_value(h5, h5, name, value, refs)
    text = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Tue Nov 24 00:00:00 2026 HDF5 schema 1.00 ."
    header = text.ljust(116, b" ") + b"\0" * 8 + b"\x00\x02" + b"IM"
    with open(path, "r+b") as f:
        f.write(header)


def write(name, fmt, path, seed):
    defect = None
    if name.startswith("bad:"):
        defect = name[4:]
        name = "plane"
    ws = scenario(name, seed)
    if defect:
        ws = corrupt(ws, defect, seed)
    if fmt == "v73":
        write_v73(path, ws)
    else:
        write_v5(path, ws, compress=(fmt == "v5z"))


def serve():
    for line in sys.stdin:
        try:
            name, fmt, path, seed = line.split()
            write(name, fmt, path, int(seed))
            print("ok", flush=True)
        except (Exception, SystemExit) as error:  # the C++ side fails the case with this reason
            print(f"error: {type(error).__name__}: {error}".replace("\n", " "), flush=True)


def main():
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        write(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))


if __name__ == "__main__":
    main()
