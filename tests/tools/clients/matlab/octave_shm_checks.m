function octave_shm_checks(configFile)
%OCTAVE_SHM_CHECKS SonopipeSender and SonopipeSubscriber on a daemon's shm:// pools, in GNU Octave
%   over the MEX gateway: frames written from Octave's arrays straight into slots of the ingest pool
%   (sp_frame_buffer), results read in place from the publish.shm pool. Run by
%   tests/python/test_shm_bridges.py, which starts the daemon and checks what this writes into
%   config.outputFolder: report.json and raw arrays (*.bin, MATLAB memory order; a complex array is
%   its real part, then its imaginary part).
config = jsondecode(fileread(configFile));
randn('state', config.seed);
rand('state', config.seed);
out = config.outputFolder;
subscriber = SonopipeSubscriber(config.results, 'result/');  % first: a live pool shows what comes after
sender = SonopipeSender(config.ingest);
frames = {
    {int16(randi([-3000 3000], 7, 5, 3)), 'rf', {'frame', 'line', 'sample'}, 1}
    {complex(single(randn(5, 3)), single(randn(5, 3))), 'iq', {'line', 'sample'}, 3}
};
sent = struct('streamId', {}, 'type', {}, 'dims', {}, 'file', {});
results = {};
for k = 1:numel(frames)
    [data, kind, names, stream] = frames{k}{:};
    description = struct('kind', kind, 'axes', struct('name', names, 'spacing', 1e-4, 'unit', 'm', 'origin', 0), ...
                         'streamId', stream);
    sender.send(data, description);
    file = sprintf('sent_%d.bin', k);
    write_array(fullfile(out, file), data);
    sent(end + 1) = struct('streamId', stream, 'type', class_name(data), 'dims', size(data), 'file', file);
    % One at a time: each result is read before the next frame is sent (a live pool keeps the newest).
    deadline = time() + 30;
    while true
        if time() > deadline
            error('octave_shm_checks:receive', 'no result for stream %d within 30 s', stream);
        end
        r = subscriber.next(500);
        if ~isempty(r)
            break
        end
    end
    file = sprintf('result_%d.bin', k);
    write_array(fullfile(out, file), r.data);
    results{end + 1} = struct('streamId', double(r.streamId), 'pipeline', r.pipeline, 'file', file, ...
                              'dataClass', class_name(r.data), 'dataDims', size(r.data));
end
report.sent = sent;
report.results = results;
report.senderStatus = sender.status();
report.senderStatus.framesSent = double(report.senderStatus.framesSent);
report.senderStatus.delivered = double(report.senderStatus.delivered);
report.senderStatus.undelivered = double(report.senderStatus.undelivered);
sender.close();
subscriber.close();
file = fopen(fullfile(out, 'report.json'), 'w');
fprintf(file, '%s', jsonencode(report));
fclose(file);
end

function name = class_name(data)
if isreal(data)
    name = class(data);
else
    name = ['complex_' class(data)];
end
end

function write_array(path, data)
precision = struct('int16', 'int16', 'single', 'float32', 'double', 'float64', 'uint8', 'uint8');
file = fopen(path, 'w');
fwrite(file, real(data), precision.(class(data)));
if ~isreal(data)
    fwrite(file, imag(data), precision.(class(data)));
end
fclose(file);
end
