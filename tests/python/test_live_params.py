"""Live parameters from Python (sonopipe.Control list/get/set/save) against the real sonopiped:
values round-trip with their types, a refused value raises ControlError naming the parameter and the
rule, results carry the generation their frame started with, and the saved YAML loads again."""
import time
import unittest

import numpy as np

import sonopipe

from daemon_fixture import IQ_SCALE, RF_SCALE, DaemonFixture, convert_reference


class LiveParameters(DaemonFixture):
    def test_list_get_set_round_trip_and_refusals(self):
        names = [p.name for p in self.control.list("rf")]
        self.assertEqual(names, ["rf.convert.scale"])
        self.assertAlmostEqual(self.control.get("rf.convert.scale"), RF_SCALE)
        described = self.control.describe("rf.convert.scale")
        self.assertTrue(described.live)
        self.assertEqual((described.type, described.unit), ("real", "1/count"))
        generation = self.control.set("rf.convert.scale", 3.0)
        self.assertEqual(generation, 1)
        self.assertEqual(self.control.get("rf.convert.scale"), 3.0)
        with self.assertRaisesRegex(sonopipe.ControlError, "rf.convert.scale: expected a number"):
            self.control.set("rf.convert.scale", "loud")
        with self.assertRaisesRegex(sonopipe.ControlError, "unknown stage"):
            self.control.set("rf.gain.scale", 1)
        self.assertEqual(self.control.get("rf.convert.scale"), 3.0)  # a refusal changes nothing
        self.assertAlmostEqual(self.control.get("iq.convert.scale"), IQ_SCALE)  # other pipelines untouched

    def test_results_carry_the_generation_of_the_scale_they_were_made_with(self):
        sub = self.subscriber(["result/rf/"])
        publisher = self.publisher()
        frames = [self.rng.integers(-2000, 2000, (2, 16), dtype=np.int16) for _ in range(6)]
        scales = {0: RF_SCALE}
        for n, frame in enumerate(frames):
            if n in (2, 4):
                scale = 1.0 + n
                scales[self.control.set("rf.convert.scale", scale)] = scale
            publisher.send(frame, kind="rf", axes=["line", "sample"])
            time.sleep(0.05)
        results = self.results(sub, len(frames))
        for frame, result in zip(frames, results):
            generation = result.header.param_generation
            np.testing.assert_array_equal(result.array, convert_reference(frame, scales[generation]))
        generations = [r.header.param_generation for r in results]
        self.assertEqual(generations, sorted(generations))  # one lane: never back to older settings
        # Frames sent after a set start after it: they cannot run with older settings.
        self.assertGreaterEqual(generations[2], 1)
        self.assertEqual(generations[4:], [2, 2])

    def test_save_returns_a_configuration_with_the_running_values(self):
        self.control.set("iq.convert.scale", 0.75)
        text = self.control.save()
        self.assertIn("scale: 0.75", text)
        self.assertIn(f"scale: {RF_SCALE}", text)


if __name__ == "__main__":
    unittest.main()
