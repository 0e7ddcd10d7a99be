function sonopipe_verasonics_external(RData)
%SONOPIPE_VERASONICS_EXTERNAL Verasonics external processing function: sends each receive frame
%   (RcvData, int16 [rows x channels]) to sonopiped as one channel_rf frame.
%
%   In the Vantage setup script (the endpoint is the daemon's ingest, a PULL socket):
%     setenv('SONOPIPE_INGEST', 'tcp://192.168.10.2:5555');
%     Process(1).classname = 'External';
%     Process(1).method = 'sonopipe_verasonics_external';
%     Process(1).Parameters = {'srcbuffer', 'receive', 'srcbufnum', 1, 'srcframenum', -1, 'dstbuffer', 'none'};
%     % and an Event per frame, after its acquisitions (transfer to host done), with
%     % Event(n).process = 1. Newer software also wants the function declared:
%     % EF(1).Function = vsv.seq.function.ExFunctionDef('sonopipe_verasonics_external', @sonopipe_verasonics_external);
%   VSX calls the function with the frame's receive buffer RData = RcvData{1}(:, :, frame).
%
%   Rows Receive(i).startSample:endSample of RData are acquisition i of the frame; columns are
%   channels, put in element order with Trans.Connector. The MATLAB array [sample, element, transmit]
%   is, in C order, the channel convention's [transmit, element, sample]. A send that cannot be
%   delivered within 1 s raises an error (VSX stops), rather than stalling the scanner unnoticed.
persistent sender description rows connector transmits
if isempty(sender)
    Trans = evalin('base', 'Trans');
    Receive = evalin('base', 'Receive');
    description = sonopipe_verasonics_description(Trans, Receive, evalin('base', 'TX'), evalin('base', 'Event'), ...
                                                   evalin('base', 'Resource'));
    acquisitions = Receive([Receive.bufnum] == 1 & [Receive.framenum] == 1);
    rows = cell2mat(arrayfun(@(r) r.startSample:r.endSample, acquisitions, 'UniformOutput', false));
    connector = Trans.Connector;
    transmits = numel(acquisitions);
    sender = SonopipeSender(getenv('SONOPIPE_INGEST'), true);
    sender.setSendTimeout(1000);
end
samples = numel(rows) / transmits;
data = permute(reshape(RData(rows, connector), samples, transmits, numel(connector)), [1 3 2]);
sender.send(data, description);
end
