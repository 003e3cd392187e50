from django.urls import path

from prompts_app import api, panel

api_urlpatterns = [
    path("prompts/", api.FragmentList.as_view(), name="api-prompts"),
    path("prompts/versions/", api.VersionList.as_view(), name="api-prompt-versions"),
    path("prompts/versions/<int:revision>/", api.VersionDetail.as_view(),
         name="api-prompt-version"),
    path("prompts/versions/<int:revision>/restore/", api.VersionRestore.as_view(),
         name="api-prompt-version-restore"),
    path("prompts/versions/<int:a>/diff/<int:b>/", api.VersionDiff.as_view(),
         name="api-prompt-version-diff"),
    path("prompts/preview/<str:role>/", api.Preview.as_view(), name="api-prompt-preview"),
    path("prompts/<str:key>/", api.FragmentDetail.as_view(), name="api-prompt"),
    path("prompts/<str:key>/restore/", api.FragmentAction.as_view(action="restore"),
         name="api-prompt-restore"),
    path("prompts/<str:key>/keep/", api.FragmentAction.as_view(action="keep"),
         name="api-prompt-keep"),
]
panel_urlpatterns = [
    path("prompts/", panel.prompts_tab, name="panel-prompts"),
    path("prompts/edit/<str:key>/", panel.edit, name="panel-prompt-edit"),
    path("prompts/new-skill/", panel.new_skill, name="panel-prompt-new-skill"),
    path("prompts/versions/", panel.versions, name="panel-prompt-versions"),
    path("prompts/versions/<int:revision>/restore/", panel.restore_version,
         name="panel-prompt-version-restore"),
    path("prompts/preview/<str:role>/", panel.preview, name="panel-prompt-preview"),
]
