"""Small UFF files written the way USTB's MATLAB writer lays them out, with h5py: the tests'
independent writer (it shares no code with sonopipe's reader or exporter).

From USTB's class definitions and uff.write_object: every object is a group with attributes
class ("uff.channel_data", ...), name, size and array; a numeric property is a dataset with class
("single", "double"), name and complex = 0, or, when complex, a group {real, imag} with complex = 1;
MATLAB stores column-major, so an array MATLAB sees as [samples x channels x waves x frames] is an
HDF5 dataset of shape (frames, waves, channels, samples); MATLAB drops trailing singleton
dimensions (keeping two); a scalar is 1x1; an array of objects is a group of <name>_0001, ...
The original PICMUS layout (/US/US_DATASET0000) is written by picmus()."""
import h5py
import numpy as np


def matlab_shape(array):
    """MATLAB's size(): trailing singletons dropped, at least two dimensions."""
    shape = list(array.shape)
    while len(shape) > 2 and shape[-1] == 1:
        shape.pop()
    while len(shape) < 2:
        shape.append(1)
    return tuple(shape)


def stored(array, dtype):
    """The HDF5 dataset MATLAB writes for `array` (indexed as MATLAB indexes it)."""
    return np.asarray(array).reshape(matlab_shape(np.asarray(array)), order="F").astype(dtype).T


class UffWriter:
    def __init__(self, path, version="v1.2.0", fixed_length_version=True):
        self.file = h5py.File(path, "w")
        if version is not None:
            # MATLAB's hdf5write writes a fixed-length string; h5py writers a variable-length one.
            self.file.attrs["version"] = np.bytes_(version) if fixed_length_version else version

    def close(self):
        self.file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def group(self, parent, name, class_name, array=False, size=(1, 1)):
        g = (parent or self.file).create_group(name)
        g.attrs["class"] = np.bytes_(class_name)
        g.attrs["name"] = np.bytes_(name)
        g.attrs["size"] = np.asarray(size, dtype=np.float64)
        g.attrs["array"] = np.float64(1 if array else 0)
        return g

    def number(self, parent, name, value, dtype=np.float32, class_name=None):
        value = np.asarray(value)
        if np.iscomplexobj(value):
            g = parent.create_group(name)
            g.attrs["class"] = np.bytes_(class_name or ("single" if dtype == np.float32 else "double"))
            g.attrs["name"] = np.bytes_(name)
            g.attrs["complex"] = np.float64(1)
            for part, values, imaginary in (("real", value.real, 0), ("imag", value.imag, 1)):
                d = g.create_dataset(part, data=stored(values, dtype))
                d.attrs["class"] = g.attrs["class"]
                d.attrs["name"] = np.bytes_(name)
                d.attrs["imaginary"] = np.float64(imaginary)
            return g
        d = parent.create_dataset(name, data=stored(value, dtype))
        d.attrs["class"] = np.bytes_(class_name or ("single" if dtype == np.float32 else "double"))
        d.attrs["name"] = np.bytes_(name)
        d.attrs["complex"] = np.float64(0)
        return d

    def text(self, parent, name, value):
        d = parent.create_dataset(name, data=stored(np.array([ord(c) for c in value], dtype=np.float64)[None, :], np.float32))
        d.attrs["class"] = np.bytes_("char")
        d.attrs["name"] = np.bytes_(name)
        return d

    def point(self, parent, name, distance, azimuth, elevation=0.0):
        g = self.group(parent, name, "uff.point")
        self.number(g, "distance", distance)
        self.number(g, "azimuth", azimuth)
        self.number(g, "elevation", elevation)
        return g

    def probe(self, parent, geometry, name="probe"):
        """geometry: [elements x 7] (x y z theta phi width height), as MATLAB holds it."""
        g = self.group(parent, name, "uff.linear_array")
        self.number(g, "geometry", geometry)
        self.number(g, "N", geometry.shape[0])
        self.number(g, "pitch", geometry[1, 0] - geometry[0, 0])
        return g

    def sequence(self, parent, waves, name="sequence", origin_name="origin"):
        """waves: list of dicts with wavefront (0 plane, 1 spherical), distance, azimuth, delay,
        optional origin (x, z)."""
        if len(waves) == 1:
            containers = [(parent, name)]
        else:
            array = self.group(parent, name, "uff.wave", array=True, size=(1, len(waves)))
            containers = [(array, f"{name}_{i + 1:04d}") for i in range(len(waves))]
        for (container, member), wave in zip(containers, waves):
            g = self.group(container, member, "uff.wave")
            self.number(g, "wavefront", wave["wavefront"], class_name="uff.wavefront")
            self.point(g, "source", wave.get("distance", np.inf), wave.get("azimuth", 0.0))
            if "origin" in wave:
                ox, oz = wave["origin"]
                self.point(g, origin_name, np.hypot(ox, oz), np.arctan2(ox, oz))
            self.number(g, "delay", wave.get("delay", 0.0))
            self.number(g, "sound_speed", wave.get("sound_speed", 1540.0))

    def pulse(self, parent, center_frequency):
        g = self.group(parent, "pulse", "uff.pulse")
        self.number(g, "center_frequency", center_frequency)
        return g


def linear_geometry(elements, pitch):
    x = (np.arange(elements) - (elements - 1) / 2) * pitch
    geometry = np.zeros((elements, 7))
    geometry[:, 0] = x
    geometry[:, 5] = pitch
    geometry[:, 6] = 10 * pitch
    return geometry


def picmus(path, data, angles, geometry3, sampling_frequency, modulation_frequency, sound_speed, initial_time):
    """The PICMUS challenge layout: data [samples x elements x angles] (MATLAB), real and imag."""
    with h5py.File(path, "w") as f:
        g = f.create_group("US/US_DATASET0000")
        d = g.create_group("data")
        d.create_dataset("real", data=stored(np.real(data), np.float32))
        d.create_dataset("imag", data=stored(np.imag(data), np.float32))
        g.create_dataset("angles", data=np.asarray(angles, dtype=np.float32))
        g.create_dataset("probe_geometry", data=stored(geometry3, np.float32))
        for name, value in (("sampling_frequency", sampling_frequency), ("modulation_frequency", modulation_frequency),
                            ("sound_speed", sound_speed), ("initial_time", initial_time)):
            g.create_dataset(name, data=np.asarray([value], dtype=np.float32))
