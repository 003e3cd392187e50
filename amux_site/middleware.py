"""Every path answers with or without its trailing slash, without a redirect (CONTRACT.md)."""

from django.urls import Resolver404, resolve


class OptionalTrailingSlashMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        path = request.path_info
        if not path.endswith("/"):
            try:
                resolve(path)
            except Resolver404:
                try:
                    resolve(path + "/")
                except Resolver404:
                    pass
                else:
                    request.path_info = path + "/"
                    request.path = request.path + "/"
        return self.get_response(request)
