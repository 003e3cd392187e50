"""The execution model's routes (seed 000): experts, presets, bots, tasks, instances and
schedules in the API; their pages under the panel's Sessions tab; and the admin pages these
models had while they lived in sessions (``/admin/agent_sessions/<model>/…``), sent on to
their place under ``/admin/execution/``."""

from django.urls import path, re_path
from django.views.generic import RedirectView

from execution import api_profiles, api_tasks, panel, schedules_api, schedules_panel

api_urlpatterns = [
    path("profiles/", api_profiles.ProfileList.as_view(), name="profile-list"),
    path("profiles/<slug:slug>/", api_profiles.ProfileDetail.as_view(), name="profile-detail"),
    path("bot-profiles/", api_profiles.BotProfileList.as_view(), name="bot-profile-list"),
    path("bot-profiles/<slug:slug>/", api_profiles.BotProfileDetail.as_view(),
         name="bot-profile-detail"),
    path("launch-presets/", api_profiles.PresetList.as_view(), name="launch-preset-list"),
    path("launch-presets/<slug:slug>/", api_profiles.PresetDetail.as_view(),
         name="launch-preset-detail"),
    path("tasks/", api_tasks.TaskList.as_view(), name="task-list"),
    path("tasks/<int:pk>/", api_tasks.TaskDetail.as_view(), name="task-detail"),
    path("instances/", api_tasks.InstanceList.as_view(), name="instance-list"),
    path("instances/<int:pk>/", api_tasks.InstanceDetail.as_view(), name="instance-detail"),
    path("instances/<int:pk>/tasks/", api_tasks.InstanceTasks.as_view(),
         name="instance-tasks"),
    path("schedules/", schedules_api.ScheduleList.as_view(), name="schedule-list"),
    path("schedules/<int:pk>/", schedules_api.ScheduleDetail.as_view(), name="schedule-detail"),
    path("schedules/<int:pk>/pause/", schedules_api.SchedulePause.as_view(),
         name="schedule-pause"),
    path("schedules/<int:pk>/resume/", schedules_api.ScheduleResume.as_view(),
         name="schedule-resume"),
    path("schedules/<int:pk>/runs/", schedules_api.ScheduleRuns.as_view(), name="schedule-runs"),
]
panel_urlpatterns = [
    path("sessions/schedules/", schedules_panel.schedules_page, name="panel-schedules"),
    path("sessions/schedules/new/", schedules_panel.schedule_create,
         name="panel-schedule-create"),
    path("sessions/schedules/<int:pk>/", schedules_panel.schedule_page, name="panel-schedule"),
    path("sessions/schedules/<int:pk>/<str:action>/", schedules_panel.schedule_action,
         name="panel-schedule-action"),
    path("sessions/tasks/", panel.task_list, name="panel-tasks"),
    path("sessions/instances/", panel.instance_list, name="panel-instances"),
    path("sessions/instances/<int:pk>/task/", panel.instance_task,
         name="panel-instance-task"),
    path("sessions/experts/", panel.profile_list, name="panel-profiles"),
    path("sessions/experts/<slug:slug>/", panel.profile_edit,
         name="panel-profile-edit"),
    path("sessions/presets/", panel.preset_list, name="panel-presets"),
]

MOVED_ADMIN = ("agentprofile", "launchpreset", "botprofile", "agentinstance", "taskrun", "schedule",
               "schedulerun")
admin_urlpatterns = [
    re_path(rf"^agent_sessions/(?P<model>{'|'.join(MOVED_ADMIN)})/(?P<rest>.*)$",
            RedirectView.as_view(url="/admin/execution/%(model)s/%(rest)s", permanent=True,
                                 query_string=True)),
]
