function sonopipe_results_reader(endpoint, topicPrefix, count)
%SONOPIPE_RESULTS_READER Shows sonopiped's results as they arrive (a display for the scanner PC).
%   sonopipe_results_reader('tcp://192.168.10.2:5556', 'result/bmode/', 100)
%   reads `count` results of the daemon's publish endpoint and draws each as an image (the last
%   two axes; a complex result is shown as its magnitude), titled with its pipeline, output and
%   the input frame's sequence number.
subscriber = SonopipeSubscriber(endpoint, topicPrefix);
figure;
shown = 0;
while shown < count
    result = subscriber.next(1000);
    if isempty(result)
        continue
    end
    image = result.data(:, :, 1);  % MATLAB [fastest, next]: the C order's last two axes, reversed
    if ~isreal(image)
        image = abs(image);
    end
    imagesc(double(image));
    colorbar;
    title(sprintf('%s / %s, frame %d (%s)', result.pipeline, result.output, result.inputSequence, result.unit), ...
          'Interpreter', 'none');
    drawnow limitrate;
    shown = shown + 1;
end
end
