function sonopipe_load(libraryFile, headerFile)
%SONOPIPE_LOAD Loads libsonopipe-client into MATLAB as the library 'sonopipe_client' (once).
%   sonopipe_load(libraryFile, headerFile) names the shared library and its header, e.g.
%     sonopipe_load('/opt/sonopipe/lib/libsonopipe-client.so', '/opt/sonopipe/include/sonopipe/sonopipe_client.h')
%   sonopipe_load() takes them from the environment variables SONOPIPE_CLIENT_LIBRARY and
%   SONOPIPE_CLIENT_HEADER. loadlibrary reads the header with the C compiler chosen by `mex -setup C`.
if libisloaded('sonopipe_client')
    return
end
if nargin < 1 || isempty(libraryFile)
    libraryFile = getenv('SONOPIPE_CLIENT_LIBRARY');
end
if nargin < 2 || isempty(headerFile)
    headerFile = getenv('SONOPIPE_CLIENT_HEADER');
end
if isempty(libraryFile) || isempty(headerFile)
    error('sonopipe:load', ['name the library and its header: sonopipe_load(LIBRARY, HEADER), ' ...
          'or set SONOPIPE_CLIENT_LIBRARY and SONOPIPE_CLIENT_HEADER']);
end
loadlibrary(libraryFile, headerFile, 'alias', 'sonopipe_client');
end
