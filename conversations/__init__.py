"""Conversations: Lark topics, direct chats and the bot-wide singleton bound to agent sessions.

Seed 000 "飞书是主要的对话式产品入口": a Lark source in a conversation mode feeds sessions,
not tickets. This app sits beside `tickets/` above intake and sessions: intake routes a
conversation-mode source's triggers here; each binding's turns are answered in its topic
as one Lark card per turn, updated in place; card callbacks (answers, permissions, goal
controls) come back through the source's verified event endpoint.
"""
