"""The execution model of seed 000 (产品身份, Task 模型): experts, launch presets, bot
profiles, persistent agent instances, task runs and schedules. Their tables kept the names
they had when these models lived in sessions (``agent_sessions_*``)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from amux_common.bounds import JsonBytes
from sessions import limits as bounds
from sessions.models import ProviderProfile, Session


# ----------------------------------------------------------------- execution model (seed 000)
class AgentProfile(models.Model):
    """An expert: reusable content from a v2 manifest (execution/core/manifest.py). It never says
    how it runs; the built-in ones (`codex`, `claude`, `pi`) cannot be edited or deleted."""

    slug = models.SlugField(max_length=60, unique=True)
    name = models.CharField(max_length=120)
    description = models.TextField(blank=True, max_length=bounds.PROFILE_DESCRIPTION)
    instructions = models.TextField(blank=True, max_length=bounds.PROFILE_INSTRUCTIONS)
    skills = models.JSONField(default=list, blank=True,
                              validators=[JsonBytes(bounds.SKILLS_BYTES)])
    builtin = models.BooleanField(default=False)
    revision = models.PositiveIntegerField(default=1, help_text="counts content edits")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "agent_sessions_agentprofile"
        ordering = ["-builtin", "slug"]

    def __str__(self):
        return self.slug


class LaunchPreset(models.Model):
    """amux's own launch settings for a shortcut (never a profile's). The one marked
    ``is_default`` is the distribution default a task that names no runtime uses."""

    slug = models.SlugField(max_length=60, unique=True)
    runtime = models.CharField(max_length=20)
    model = models.CharField(max_length=120)
    effort = models.CharField(max_length=20, blank=True)
    provider = models.ForeignKey(ProviderProfile, null=True, blank=True,
                                 on_delete=models.SET_NULL, related_name="presets",
                                 help_text="provider binding; none: the runtime's only one")
    permission = models.CharField(max_length=20, blank=True,
                                  help_text="bypass or ask; blank: the native bypass")
    extra_args = models.JSONField(default=list, blank=True,
                                  validators=[JsonBytes(bounds.ARGS_BYTES)])
    is_default = models.BooleanField(default=False)
    builtin = models.BooleanField(default=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "agent_sessions_launchpreset"
        ordering = ["slug"]
        constraints = [models.UniqueConstraint(fields=["is_default"], name="one_default_preset",
                                               condition=Q(is_default=True))]

    def __str__(self):
        return self.slug


class BotProfile(models.Model):
    """The assistant's persona in chat: its name, default expert and launch preset."""

    slug = models.SlugField(max_length=60, unique=True)
    name = models.CharField(max_length=120)
    agent_profile = models.ForeignKey(AgentProfile, null=True, blank=True,
                                      on_delete=models.PROTECT, related_name="bots")
    launch_preset = models.ForeignKey(LaunchPreset, null=True, blank=True,
                                      on_delete=models.PROTECT, related_name="bots")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "agent_sessions_botprofile"
        ordering = ["slug"]

    def __str__(self):
        return self.slug


class AgentInstance(models.Model):
    """A persistent agent: one identity and one session (its native conversation) kept
    across tasks; each task given to it is a TaskRun on that session."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="agent_instances")
    name = models.CharField(max_length=120)
    profile = models.ForeignKey(AgentProfile, null=True, blank=True, on_delete=models.PROTECT,
                                related_name="instances")
    session = models.OneToOneField(Session, on_delete=models.PROTECT, related_name="instance")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "agent_sessions_agentinstance"
        ordering = ["-id"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"],
                                               name="instance_unique_name")]

    def __str__(self):
        return self.name


class TaskRunState(models.TextChoices):
    QUEUED = "queued", "queued"
    RUNNING = "running", "running"
    SUCCEEDED = "succeeded", "succeeded"
    FAILED = "failed", "failed"
    CANCELLED = "cancelled", "cancelled"


class TaskRun(models.Model):
    """One task given to an agent: one turn of its own child session (or of an instance's
    session). ``state`` is queued until the turn starts, running while it runs, then the
    outcome of the turn's terminal event (execution/task_runs.py)."""

    TERMINAL = ("succeeded", "failed", "cancelled")

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="task_runs")
    prompt = models.TextField(max_length=bounds.PROMPT)
    profile = models.ForeignKey(AgentProfile, null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="task_runs")
    instance = models.ForeignKey(AgentInstance, null=True, blank=True,
                                 on_delete=models.CASCADE, related_name="task_runs")
    session = models.ForeignKey(Session, on_delete=models.PROTECT, related_name="task_runs")
    turn_key = models.CharField(max_length=120, help_text="the key of the turn it posted")
    state = models.CharField(max_length=10, choices=TaskRunState.choices, default="queued")
    result = models.TextField(blank=True, help_text="the agent's final answer")
    error_code = models.CharField(max_length=60, blank=True)
    error_message = models.TextField(blank=True)
    execution = models.JSONField(default=dict, blank=True, help_text="frozen settings")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "agent_sessions_taskrun"
        ordering = ["-id"]
        indexes = [models.Index(fields=["session", "turn_key"], name="task_run_turn")]

    def __str__(self):
        return f"task {self.pk}"



# ----------------------------------------------------------------- schedules (seed 000)
class ScheduleMode(models.TextChoices):
    REUSE_SESSION = "reuse-session", "one session kept for the schedule"
    NEW_SESSION = "new-session-per-run", "a fresh session per firing"
    SUBTASK = "subtask", "a bounded task per firing"


class Schedule(models.Model):
    """A prompt that fires on a cron expression or every N seconds (execution/schedules.py).
    ``execution`` is resolved and frozen when the schedule is defined: every firing runs
    with those settings, whatever the presets say later."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                              related_name="schedules")
    name = models.CharField(max_length=120)
    cron = models.CharField(max_length=120, blank=True, help_text="five fields, UTC")
    every_seconds = models.PositiveIntegerField(null=True, blank=True)
    mode = models.CharField(max_length=24, choices=ScheduleMode.choices)
    prompt = models.TextField(max_length=bounds.PROMPT)
    profile = models.CharField(max_length=60, blank=True, help_text="the expert's slug")
    execution = models.JSONField(default=dict, blank=True, help_text="frozen settings")
    session = models.ForeignKey(Session, null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="+", help_text="reuse-session: the one session")
    paused = models.BooleanField(default=False)
    anchor = models.DateTimeField(help_text="interval slots count from here")
    next_fire_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "agent_sessions_schedule"
        ordering = ["-id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="schedule_unique_name"),
            models.CheckConstraint(
                condition=(Q(cron="") & Q(every_seconds__gte=10))
                | (~Q(cron="") & Q(every_seconds__isnull=True)),
                name="schedule_one_timing"),
        ]
        indexes = [models.Index(fields=["next_fire_at"], name="schedule_due",
                                condition=Q(paused=False))]

    def __str__(self):
        return self.name


class ScheduleRun(models.Model):
    """One firing of a schedule: at most one per slot, whoever asks twice."""

    schedule = models.ForeignKey(Schedule, on_delete=models.CASCADE, related_name="runs")
    slot = models.DateTimeField()
    fired_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True,
                                      help_text="when its session or task was set going")
    session = models.ForeignKey(Session, null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="+")
    turn_key = models.CharField(max_length=120, blank=True)
    task = models.ForeignKey("TaskRun", null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="+")
    error_code = models.CharField(max_length=60, blank=True)
    error_message = models.TextField(blank=True)

    class Meta:
        db_table = "agent_sessions_schedulerun"
        ordering = ["-slot"]
        constraints = [models.UniqueConstraint(fields=["schedule", "slot"],
                                               name="schedule_run_unique_slot")]
        indexes = [models.Index(fields=["fired_at"], name="schedule_run_unstarted",
                                condition=Q(started_at__isnull=True, error_code=""))]
