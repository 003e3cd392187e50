"""The site's own middleware, each async-capable (amux_common/request_hooks.py): every path
answers with or without its trailing slash, without a redirect (CONTRACT.md), and static
files are served by WhiteNoise."""

from asgiref.sync import sync_to_async
from django.urls import Resolver404, resolve
from whitenoise.middleware import WhiteNoiseMiddleware

from amux_common.request_hooks import BothWays, RequestHook


class OptionalTrailingSlashMiddleware(RequestHook):
    def before(self, request):
        path = request.path_info
        if not path.endswith("/"):
            # Every route but two files ends in "/": that is tried first, so a webhook posted
            # without the slash costs one resolve that matches, not one that fails through
            # every pattern (the admin's among them) and a second one.
            try:
                resolve(path + "/")
            except Resolver404:
                pass
            else:
                request.path_info = path + "/"
                request.path = request.path + "/"
        return None


class StaticFilesMiddleware(BothWays, WhiteNoiseMiddleware):
    """WhiteNoise, which is sync-only, also on the event loop: a static file is looked up
    in memory (on disk, in a thread, with AMUX_DEBUG's autorefresh) and served from a
    thread; any other request goes on without leaving the loop."""

    def __init__(self, get_response):
        WhiteNoiseMiddleware.__init__(self, get_response)
        BothWays.__init__(self, get_response)

    def _call(self, request):
        return WhiteNoiseMiddleware.__call__(self, request)

    async def _acall(self, request):
        if self.autorefresh:
            static_file = await sync_to_async(self.find_file, thread_sensitive=False)(
                request.path_info)
        else:
            static_file = self.files.get(request.path_info)
        if static_file is not None:
            return await sync_to_async(self.serve, thread_sensitive=False)(static_file, request)
        return await self.get_response(request)
