classdef SonopipeSender < handle
%SONOPIPESENDER Sends MATLAB/Octave arrays to sonopiped through libsonopipe-client (sonopipe_mex).
%   sender = SonopipeSender(endpoint)               lossless (PUSH) to `ingest: {pattern: pull}`
%   sender = SonopipeSender(endpoint, false)        live (PUB) to `ingest: {pattern: sub}`
%   sender = SonopipeSender(endpoint, true, keys)   with CURVE: keys.serverPublic, keys.clientPublic,
%                                                   keys.clientSecret (40-character Z85 text each)
%   sender.setSendTimeout(ms)                       how long a lossless send waits for the daemon
%   sender.send(data, description)                  one frame; errors carry the library's message
%   s = sender.status()                             framesSent, endpoint, lossless
%   sender.close()  (or delete(sender))             delivers queued frames (up to 10 s) and closes
%
%   data: int16, single, double, uint8 (sent as they are), or complex single/double (sent as
%   interleaved single, 'complex64'). description (struct), C order = MATLAB's dimensions reversed:
%     kind                     'iq' | 'rf' | 'dce' | 'channel_rf' | 'channel_iq'
%     axes                     struct array, outermost first: name, and optional spacing (0),
%                              unit (''), origin (0); axis i has size size(data, numel(axes) - i + 1)
%     streamId                 (0)      sequence (automatic 0, 1, 2, ... per stream if absent)
%     acquisitionTimeNs        (stamped at send if absent), an int64
%     samplingFrequencyHz (0), centerFrequencyHz (0), demodulationFrequencyHz (0), speedOfSoundMPerS (1540)
%     vectors                  struct array: name, values, unit      (optional)
%     attributes               struct array: key, value (char)        (optional)
    properties (SetAccess = private)
        Handle   % the gateway's number for this sender ([] once closed)
    end

    methods
        function obj = SonopipeSender(endpoint, lossless, curveKeys)
            if nargin < 2
                lossless = true;
            end
            if nargin < 3
                curveKeys = [];
            end
            sonopipe_build_mex();  % compiles the gateway on first use where none is on the path
            obj.Handle = sonopipe_mex('sender_open', endpoint, logical(lossless), curveKeys);
        end

        function setSendTimeout(obj, timeoutMs)
            sonopipe_mex('sender_set_timeout', obj.Handle, timeoutMs);
        end

        function send(obj, data, description)
            sonopipe_mex('send', obj.Handle, data, description);
        end

        function s = status(obj)
            s = sonopipe_mex('sender_status', obj.Handle);
        end

        function close(obj)
            if ~isempty(obj.Handle)
                sonopipe_mex('sender_close', obj.Handle);
                obj.Handle = [];
            end
        end

        function delete(obj)
            obj.close();
        end
    end
end
