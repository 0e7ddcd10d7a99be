function octave_client_checks(configFile)
%OCTAVE_CLIENT_CHECKS The MATLAB-facing API (SonopipeSender, SonopipeSubscriber, the Verasonics
%   external-processing functions) run for real in GNU Octave over the MEX gateway, in one process.
%   Run by tests/python/test_octave_client.py, which starts the daemons and a plain PULL socket,
%   passes their endpoints in the JSON file `configFile`, and checks everything this writes into
%   config.outputFolder: report.json (what was sent, received and raised) and raw arrays (*.bin,
%   MATLAB memory order; a complex array is its real part, then its imaginary part).
%   Sends: every element type to the plain PULL (wire check); int16/single/complex frames through
%   the daemon's `convert`, received back here; RcvData frames through sonopipe_verasonics_external
%   as the sequencer calls it (one to the plain PULL, two to the daemon) and one IQ frame through
%   sonopipe_verasonics_external_iq; errors; CURVE keys against a daemon with security.curve.
config = jsondecode(fileread(configFile));
rand('state', config.seed);
randn('state', config.seed);
out = config.outputFolder;
report = struct();

%% 1. every element type reaches the wire (a plain PULL socket) with its full description
sender = SonopipeSender(config.wireEndpoint);
sender.setSendTimeout(10000);
types = {'int16', 'single', 'double', 'uint8', 'complex_single', 'complex_double'};
dims = [5 3 2];  % every size differs, so a swapped axis cannot pass
wire = struct('type', {}, 'dims', {}, 'file', {});
for k = 1:numel(types)
    data = make_data(types{k}, dims);
    description = wire_description(k, config);
    sender.send(data, description);
    file = sprintf('wire_%d.bin', k);
    write_array(fullfile(out, file), data);
    wire(end + 1) = struct('type', types{k}, 'dims', size(data), 'file', file);
end
report.wire = wire;
report.wireStatus = sender.status();
report.wireStatus.framesSent = double(report.wireStatus.framesSent);
sender.close();

%% 2. frames through the daemon's convert, results received here (and by the Python test)
subscriber = SonopipeSubscriber(config.publish, 'result/');
sender = SonopipeSender(config.ingest);
join(sender, subscriber);
frames = {
    {int16(randi([-3000 3000], 7, 5, 3)), 'rf', {'frame', 'line', 'sample'}, 1}
    {single(randn(6, 4)), 'rf', {'line', 'sample'}, 2}
    {complex(single(randn(5, 3)), single(randn(5, 3))), 'iq', {'line', 'sample'}, 3}
    {int16(randi([-3000 3000], 2, 6, 4)), 'iq', {'line', 'sample', 'iq'}, 4}  % I, Q on MATLAB's first dimension
};
sent = struct('streamId', {}, 'type', {}, 'dims', {}, 'file', {});
for k = 1:numel(frames)
    [data, kind, names, stream] = frames{k}{:};
    description = struct('kind', kind, 'axes', struct('name', names, 'spacing', 1e-4, 'unit', 'm', 'origin', 0), ...
                         'streamId', stream, 'attributes', struct('key', 'probe', 'value', sprintf('P%d', k)));
    sender.send(data, description);
    file = sprintf('daemon_sent_%d.bin', k);
    write_array(fullfile(out, file), data);
    sent(end + 1) = struct('streamId', stream, 'type', class_name(data), 'dims', size(data), 'file', file);
end
report.daemonSent = sent;
report.daemonResults = receive(subscriber, numel(frames), out, 'daemon_result', {'probe', 'absent'}, {});
report.senderStatus = sender.status();
report.senderStatus.framesSent = double(report.senderStatus.framesSent);
report.subscriberStatus = subscriber.status();
report.subscriberStatus.skipped = double(report.subscriberStatus.skipped);
sender.close();

%% 3. the Verasonics external functions, called as the sequencer calls them
[Trans, Receive, TX, Event, Resource, PData, RcvData] = verasonics_setup();
assignin('base', 'Trans', Trans);
assignin('base', 'Receive', Receive);
assignin('base', 'TX', TX);
assignin('base', 'Event', Event);
assignin('base', 'Resource', Resource);
assignin('base', 'PData', PData);
% First the newest frame to the plain PULL, where the whole header (vectors too) is checked; the
% persistent sender is dropped (clear) so the next call opens one to the daemon.
setenv('SONOPIPE_INGEST', config.wireEndpoint);
sonopipe_verasonics_external(RcvData{1}(:, :, end));
clear sonopipe_verasonics_external
setenv('SONOPIPE_INGEST', config.ingest);
for frame = 1:size(RcvData{1}, 3)
    % Process(1).Parameters = {'srcbuffer','receive','srcbufnum',1,'srcframenum',-1,...}: the
    % sequencer passes the receive buffer's newest frame, RcvData{1}(:, :, frame).
    sonopipe_verasonics_external(RcvData{1}(:, :, frame));
end
write_array(fullfile(out, 'rcvdata.bin'), RcvData{1});
report.verasonics = struct('rcvDims', size(RcvData{1}), 'connector', Trans.Connector(:)', ...
                           'startSample', [Receive.startSample], 'endSample', [Receive.endSample], ...
                           'framenum', [Receive.framenum]);
IData = randn(20, 6);
QData = randn(20, 6);
sonopipe_verasonics_external_iq(IData, QData);
write_array(fullfile(out, 'iq_sent.bin'), complex(IData, QData));
report.verasonicsResults = receive(subscriber, 3, out, 'verasonics_result', {'source'}, {});
clear sonopipe_verasonics_external sonopipe_verasonics_external_iq  % their senders close (delete)
subscriber.close();

%% 4. errors are Octave errors carrying the library's message
errors = struct('what', {}, 'identifier', {}, 'message', {});
sender = SonopipeSender(config.wireEndpoint);
two = struct('name', {'line', 'sample'});
errors(end + 1) = caught('unknown kind', @() sender.send(single(zeros(4, 2)), struct('kind', 'doppler', 'axes', two)));
errors(end + 1) = caught('fewer axes than dimensions', @() sender.send(single(zeros(4, 2, 3)), struct('kind', 'rf', 'axes', two)));
errors(end + 1) = caught('int32 data', @() sender.send(int32(zeros(4, 2)), struct('kind', 'rf', 'axes', two)));
handle = sender.Handle;
sender.close();
errors(end + 1) = caught('a closed sender', @() sonopipe_mex('send', handle, single(1), struct('kind', 'rf', 'axes', two)));
nowhere = SonopipeSender(config.unreachableEndpoint);
nowhere.setSendTimeout(200);
errors(end + 1) = caught('no daemon', @() nowhere.send(single(zeros(4, 2)), struct('kind', 'rf', 'axes', two)));
nowhere.close();
badKeys = struct('serverPublic', 'not a key', 'clientPublic', config.clientPublic, 'clientSecret', config.clientSecret);
errors(end + 1) = caught('bad key text', @() SonopipeSender(config.curveIngest, true, badKeys));
report.errors = errors;

%% 5. CURVE keys: a round trip through a daemon whose sockets are CURVE servers
keys = struct('serverPublic', config.serverPublic, 'clientPublic', config.clientPublic, 'clientSecret', config.clientSecret);
subscriber = SonopipeSubscriber(config.curvePublish, 'result/', keys);
sender = SonopipeSender(config.curveIngest, true, keys);
sender.setSendTimeout(20000);  % the CURVE handshake comes first
join(sender, subscriber);
data = single(randn(9, 2));
sender.send(data, struct('kind', 'rf', 'axes', two, 'streamId', 5));
write_array(fullfile(out, 'curve_sent.bin'), data);
report.curveResults = receive(subscriber, 1, out, 'curve_result', {}, {});
sender.close();
subscriber.close();
wrongKeys = keys;
wrongKeys.serverPublic = config.clientPublic;  % a valid key, but not the server's
stranger = SonopipeSender(config.curveIngest, true, wrongKeys);
stranger.setSendTimeout(500);
report.curveWrongKey = caught('wrong server key', @() stranger.send(data, struct('kind', 'rf', 'axes', two)));
stranger.close();

report.version = sonopipe_mex('version');
file = fopen(fullfile(out, 'report.json'), 'w');
fputs(file, jsonencode(report));
fclose(file);
disp('octave_client_checks: done');
end

function data = make_data(type, dims)
switch type
    case 'int16'
        data = int16(randi([-32768 32767], dims));
    case 'single'
        data = single(randn(dims));
    case 'double'
        data = randn(dims);
    case 'uint8'
        data = uint8(randi([0 255], dims));
    case 'complex_single'
        data = complex(single(randn(dims)), single(randn(dims)));
    case 'complex_double'
        data = complex(randn(dims), randn(dims));
end
end

function description = wire_description(k, config)
% Every field of the description; the values the Python test expects follow from k and config.
description.kind = 'rf';
description.axes = struct('name', {'a', 'b', 'c'}, 'spacing', {0.5, 1e-3, 2.5e-8}, 'unit', {'', 'm', 's'}, ...
                          'origin', {-1, 0.25, 1e-6});
description.streamId = k;
if mod(k, 2) == 1
    description.sequence = 100 + k;
end
description.acquisitionTimeNs = int64(config.timeSeconds) * int64(1000000000) + int64(k);
description.samplingFrequencyHz = 40e6;
description.centerFrequencyHz = 5.2e6;
description.demodulationFrequencyHz = 1e6 * k;
description.speedOfSoundMPerS = 1480;
description.vectors = struct('name', {'weights', 'small'}, 'values', {[1.5; 2.5; -3], single([4 5])}, 'unit', {'m', ''});
description.attributes = struct('key', {'probe', 'site'}, 'value', {'L11-5v', sprintf('lab%d', k)});
end

function name = class_name(data)
if isreal(data)
    name = class(data);
else
    name = ['complex_' class(data)];
end
end

function write_array(path, data)
precision = struct('int16', 'int16', 'single', 'float32', 'double', 'float64', 'uint8', 'uint8', 'uint16', 'uint16');
file = fopen(path, 'w');
fwrite(file, real(data), precision.(class(data)));
if ~isreal(data)
    fwrite(file, imag(data), precision.(class(data)));
end
fclose(file);
end

function join(sender, subscriber)
% ZeroMQ's slow joiner: probe frames (stream 99) until one comes back as a result, then drain.
probe = struct('kind', 'rf', 'axes', struct('name', {'line', 'sample'}), 'streamId', 99);
for attempt = 1:300
    sender.send(single(zeros(4, 2)), probe);
    if ~isempty(subscriber.next(100))
        while ~isempty(subscriber.next(300))
        end
        return
    end
end
error('octave_client_checks:join', 'no probe result came back in 30 s');
end

function results = receive(subscriber, count, out, prefix, attributeKeys, vectorNames)
% The next `count` results other than probes: their header fields and data (written to files).
results = {};
deadline = time() + 30;
while numel(results) < count
    if time() > deadline
        error('octave_client_checks:receive', 'only %d of %d results arrived', numel(results), count);
    end
    r = subscriber.next(500, attributeKeys, vectorNames);
    if isempty(r) || r.streamId == 99
        continue
    end
    file = sprintf('%s_%d.bin', prefix, numel(results) + 1);
    write_array(fullfile(out, file), r.data);
    entry = rmfield(r, 'data');
    entry.file = file;
    entry.dataClass = class_name(r.data);
    entry.dataDims = size(r.data);
    entry.streamId = double(r.streamId);
    entry.inputSequence = sprintf('%d', r.inputSequence);
    entry.acquisitionTimeNs = sprintf('%d', r.acquisitionTimeNs);
    entry.receivedNs = sprintf('%d', r.receivedNs);
    entry.publishedNs = sprintf('%d', r.publishedNs);
    results{end + 1} = entry;
end
end

function entry = caught(what, action)
entry = struct('what', what, 'identifier', '', 'message', '');
try
    action();
catch failure
    entry.identifier = failure.identifier;
    entry.message = failure.message;
end
end

function [Trans, Receive, TX, Event, Resource, PData, RcvData] = verasonics_setup()
% A small Vantage script's structures as VSX leaves them in the base workspace, and RcvData as a
% real save holds it: {int16 [rowsPerFrame x channels x frames]}, rows padded to a multiple of 128.
% 3 plane-wave acquisitions of 48 samples per frame on 8 channels (connector permuted), 2 frames;
% Receive(i).startSample/endSample are rows within each frame's page.
acquisitions = 3;
samples = 48;
channels = 8;
frames = 2;
rowsPerFrame = 128 * ceil(acquisitions * samples / 128);
Receive = struct('bufnum', {}, 'framenum', {}, 'startSample', {}, 'endSample', {}, 'decimSampleRate', {}, ...
                 'startDepth', {});
for frame = 1:frames
    for a = 1:acquisitions
        Receive(end + 1) = struct('bufnum', 1, 'framenum', frame, 'startSample', 1 + (a - 1) * samples, ...
                                  'endSample', a * samples, 'decimSampleRate', 20.8333, 'startDepth', 2);
    end
end
steer = [-0.1, 0, 0.1];
TX = struct('Steer', {[steer(1) 0], [steer(2) 0], [steer(3) 0]});
% Event k receives into Receive(rcv) with TX(tx); a processing event (rcv 0) first.
Event = struct('rcv', num2cell([0, 1:acquisitions * frames]), 'tx', num2cell([0, mod(0:acquisitions * frames - 1, 3) + 1]));
ElementPos = zeros(channels, 5);
ElementPos(:, 1) = ((0:channels - 1) - 3.5)';  % wavelengths
[~, order] = sort(rand(1, channels));
Trans = struct('frequency', 5.208, 'ElementPos', ElementPos, 'lensCorrection', 0.7, 'Connector', order(:));
Resource.Parameters.speedOfSound = 1540;
PData = struct('PDelta', [0.5 0 0.25], 'Origin', [-10 0 3]);
RcvData = {int16(randi([-32768 32767], rowsPerFrame, channels, frames))};
end
