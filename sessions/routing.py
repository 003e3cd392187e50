from django.urls import path

from sessions.consumers import TimelineConsumer

websocket_urlpatterns = [
    path("ws/sessions/<int:pk>/timeline", TimelineConsumer.as_asgi()),
    path("ws/sessions/<int:pk>/timeline/", TimelineConsumer.as_asgi()),
]
