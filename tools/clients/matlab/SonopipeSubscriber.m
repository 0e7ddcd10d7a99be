classdef SonopipeSubscriber < handle
%SONOPIPESUBSCRIBER Reads sonopiped's results into MATLAB/Octave through libsonopipe-client (sonopipe_mex).
%   subscriber = SonopipeSubscriber(endpoint)                  every result ('result/')
%   subscriber = SonopipeSubscriber(endpoint, 'result/bmode/') one pipeline's results
%   subscriber = SonopipeSubscriber(endpoint, prefix, keys)    with CURVE keys (see SonopipeSender)
%   result = subscriber.next(timeoutMs)                        [] when none came in time
%   result = subscriber.next(timeoutMs, {'probe'})             also these attributes of the frame
%   result = subscriber.next(timeoutMs, {}, {'element_x_m'})   also these vectors of the frame
%   s = subscriber.status()                                    skipped (malformed messages), endpoint, prefix
%   subscriber.close()  (or delete(subscriber))
%
%   result: topic, pipeline, output, streamId, inputSequence, acquisitionTimeNs, inputKind,
%   elementType, unit, backend, receivedNs, publishedNs, axes (struct array: name, size, spacing,
%   unit, origin; outermost first), attributes (struct: key -> value, '' when absent), vectors
%   (struct: name -> column, empty when absent) and data, an array of size [fliplr(axis sizes) 1]
%   (C order reversed), complex single for complex64, uint16 bits for float16.
%   Results published before the subscription reached the daemon are not received (ZeroMQ).
    properties (SetAccess = private)
        Handle   % the gateway's number for this subscriber ([] once closed)
    end

    methods
        function obj = SonopipeSubscriber(endpoint, topicPrefix, curveKeys)
            if nargin < 2
                topicPrefix = 'result/';
            end
            if nargin < 3
                curveKeys = [];
            end
            sonopipe_build_mex();
            obj.Handle = sonopipe_mex('subscriber_open', endpoint, topicPrefix, curveKeys);
        end

        function result = next(obj, timeoutMs, attributeKeys, vectorNames)
            if nargin < 3
                attributeKeys = {};
            end
            if nargin < 4
                vectorNames = {};
            end
            result = sonopipe_mex('next', obj.Handle, timeoutMs, attributeKeys, vectorNames);
        end

        function s = status(obj)
            s = sonopipe_mex('subscriber_status', obj.Handle);
        end

        function close(obj)
            if ~isempty(obj.Handle)
                sonopipe_mex('subscriber_close', obj.Handle);
                obj.Handle = [];
            end
        end

        function delete(obj)
            obj.close();
        end
    end
end
