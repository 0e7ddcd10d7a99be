function sonopipe_verasonics_external_iq(IData, QData)
%SONOPIPE_VERASONICS_EXTERNAL_IQ Verasonics external processing function: sends each beamformed IQ
%   frame (IQData of an InterBuffer, [rows=z x columns=x]) to sonopiped as one iq frame (complex64).
%
%   In the Vantage setup script:
%     setenv('SONOPIPE_INGEST', 'tcp://192.168.10.2:5555');
%     Process(2).classname = 'External';
%     Process(2).method = 'sonopipe_verasonics_external_iq';
%     Process(2).Parameters = {'srcbuffer', 'inter', 'srcbufnum', 1, 'srcframenum', -1, 'dstbuffer', 'none'};
%   VSX calls it with the frame's IData and QData (same size). PData(1).PDelta ([x y z] spacing)
%   and PData(1).Origin are in wavelengths; they become the axes' spacing and origin in metres.
%   The MATLAB array [z, x] is, in C order, [line=x, sample=z].
persistent sender description
if isempty(sender)
    PData = evalin('base', 'PData');
    Trans = evalin('base', 'Trans');
    Resource = evalin('base', 'Resource');
    speedOfSound = Resource.Parameters.speedOfSound;
    centerFrequencyHz = Trans.frequency * 1e6;
    wavelength = speedOfSound / centerFrequencyHz;
    description.kind = 'iq';
    description.axes = struct('name', {'line', 'sample'}, ...
                              'spacing', {PData(1).PDelta(1) * wavelength, PData(1).PDelta(3) * wavelength}, ...
                              'unit', {'m', 'm'}, ...
                              'origin', {PData(1).Origin(1) * wavelength, PData(1).Origin(3) * wavelength});
    description.centerFrequencyHz = centerFrequencyHz;
    description.demodulationFrequencyHz = centerFrequencyHz;  % Verasonics demodulates at Trans.frequency
    description.speedOfSoundMPerS = speedOfSound;
    description.attributes = struct('key', {'source'}, 'value', {'verasonics'});
    sender = SonopipeSender(getenv('SONOPIPE_INGEST'), true);
    sender.setSendTimeout(1000);
end
sender.send(complex(single(IData), single(QData)), description);
end
