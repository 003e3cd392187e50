"""Every path answers with or without its trailing slash, without a redirect (CONTRACT.md)."""

from django.urls import Resolver404, resolve


class OptionalTrailingSlashMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
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
        return self.get_response(request)
