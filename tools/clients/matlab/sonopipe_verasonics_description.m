function description = sonopipe_verasonics_description(Trans, Receive, TX, Event, Resource)
%SONOPIPE_VERASONICS_DESCRIPTION The channel_rf frame description of one Verasonics receive frame.
%   Reads the setup structures of a Vantage script (as VSX leaves them in the base workspace):
%     Trans.frequency (MHz), Trans.ElementPos (wavelengths unless Trans.units is 'mm'),
%     Trans.lensCorrection (wavelengths, one way), Receive(i).framenum/bufnum/startSample/endSample,
%     Receive(1).decimSampleRate (MHz), Receive(1).startDepth (wavelengths),
%     TX(Event(k).tx).Steer(1) (rad) of the Event k that acquires Receive(i) (Event(k).rcv == i),
%     Resource.Parameters.speedOfSound (m/s).
%   Axes follow stages/beamform/channel_conventions.h: transmit, element, sample (outermost first),
%   which is the MATLAB array [sample, element, transmit] that sonopipe_verasonics_external builds.
%   Assumes every acquisition of a frame has the same number of samples (one Receive geometry).
speedOfSound = Resource.Parameters.speedOfSound;
centerFrequencyHz = Trans.frequency * 1e6;
wavelength = speedOfSound / centerFrequencyHz;
acquisitions = find([Receive.bufnum] == 1 & [Receive.framenum] == 1);
samplingFrequencyHz = Receive(acquisitions(1)).decimSampleRate * 1e6;
% startDepth is one-way, in wavelengths: its echo arrives 2 * startDepth / f_c after time zero.
firstSampleS = 2 * Receive(acquisitions(1)).startDepth / centerFrequencyHz;
if isfield(Trans, 'units') && strcmp(Trans.units, 'mm')
    elementX = Trans.ElementPos(:, 1) * 1e-3;
else
    elementX = Trans.ElementPos(:, 1) * wavelength;
end
% The transmit of each acquisition: the first Event that receives into it.
steering = arrayfun(@(i) TX(Event(find([Event.rcv] == i, 1)).tx).Steer(1), acquisitions);

description.kind = 'channel_rf';
description.axes = struct('name', {'transmit', 'element', 'sample'}, 'spacing', {0, 0, 1 / samplingFrequencyHz}, ...
                          'unit', {'', '', 's'}, 'origin', {0, 0, firstSampleS});
description.samplingFrequencyHz = samplingFrequencyHz;
description.centerFrequencyHz = centerFrequencyHz;
description.demodulationFrequencyHz = 0;
description.speedOfSoundMPerS = speedOfSound;
description.vectors = struct('name', {'element_x_m', 'transmit_angle_rad', 'transmit_wavefront'}, ...
                             'values', {elementX, steering, zeros(size(steering))}, ...  % 0 = plane wave
                             'unit', {'m', 'rad', ''});
if isfield(Trans, 'lensCorrection')
    % One-way lens path in wavelengths -> the two-way delay of every echo.
    description.vectors(end + 1) = struct('name', 'element_delay_s', ...
        'values', repmat(2 * Trans.lensCorrection / centerFrequencyHz, numel(elementX), 1), 'unit', 's');
end
description.attributes = struct('key', {'source'}, 'value', {'verasonics'});
end
