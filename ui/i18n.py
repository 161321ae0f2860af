"""The UI's words in English and Korean, and the choice of language (pure).

The default language is the browser's (``Accept-Language``); an explicit choice (the switch on
the login and chat pages) wins over it.
"""

from __future__ import annotations

LANGUAGES = ("en", "ko")
LANGUAGE_NAMES = {"en": "English", "ko": "한국어"}

STRINGS: dict[str, dict[str, str]] = {
    "en": {
        "app.title": "Company help chat",
        "login.title": "Sign in",
        "login.intro": "Sign in with your company account.",
        "login.username": "Username",
        "login.password": "Password",
        "login.submit": "Sign in",
        "login.failed": "Wrong username or password.",
        "login.locked": "Too many failed attempts. Try again in {seconds} seconds.",
        "login.directory_down": "The company directory cannot be reached right now. "
        "Try again shortly, or ask an administrator.",
        "login.directory_refused": "Your company account may not use this appliance "
        "(no group that admits it, or a local account has that name). Ask an administrator.",
        "login.oidc": "Sign in with {provider}",
        "login.or": "or with an account of this appliance",
        "login.oidc_failed": "The sign-in with your company account could not be completed. "
        "Start again.",
        "login.oidc_down": "The company sign-in service cannot be reached right now. "
        "Try again shortly, or use an account of this appliance.",
        "login.expired": "Your session has ended. Please sign in again.",
        "login.signed_out": "You have signed out.",
        "logout.confirm": "Sign out of the help chat in this browser?",
        "logout.back": "Back to the chat",
        "password.heading": "Change password",
        "password.note": "Your API keys keep working. Your other signed-in browsers are "
        "signed out; this one stays signed in.",
        "password.current": "Current password",
        "password.new": "New password (at least 8 characters)",
        "password.submit": "Change password",
        "password.changed": "Password changed. Other sessions signed out: {count}.",
        "password.wrong": "The current password is wrong.",
        "password.short": "The new password must be at least 8 characters.",
        "password.same": "The new password must differ from the current one.",
        "nav.logout": "Log out",
        "nav.language": "Language",
        "conv.heading": "Conversations",
        "chat.next": "Your question is next: it starts as soon as an answer finishes.",
        "chat.ahead_one": "1 question ahead of yours; yours starts right after it.",
        "chat.ahead": "{n} questions ahead of yours; yours starts as soon as they are answered.",
        "conv.new": "New chat",
        "conv.none": "No conversations yet.",
        "conv.rename_label": "Name",
        "conv.rename": "Rename",
        "conv.manage": "Rename or delete",
        "conv.delete": "Delete",
        "conv.deleted": "Conversation deleted.",
        "conv.untitled": "New chat",
        "chat.label": "Chat",
        "chat.question": "Your question",
        "chat.placeholder": "Ask about IT, HR or security policies… (Shift+Enter: new line)",
        "chat.send": "Send",
        "chat.stop": "Stop",
        "chat.regenerate": "Regenerate",
        "chat.thinking": "…",
        "chat.stopped": "Stopped. Your question is kept below; press Send to ask again.",
        "chat.cut": "The answer was cut at the length limit.",
        "chat.repeated": "The answer began to repeat itself, so it was stopped there.",
        "chat.continue": "Continue",
        "chat.write_note": (
            "These are the documents' own sentences. The model can write an answer from them: "
            "it takes longer, and what it says is checked against them."
        ),
        "chat.write": "Write an answer",
        "error.busy": "The answer engine is busy right now.",
        "error.unavailable": "The answer engine is not reachable right now.",
        "error.yours": (
            "Busy: you already have {n} questions in progress. Try again once one is answered."
        ),
        "error.full": "Busy: {n} questions are already waiting for the engine. Try again soon.",
        "error.other": "The question could not be answered: {message}",
        "error.keep": "Your question is kept below; press Send to retry. Nothing was lost.",
        "sources.heading": "Sources",
        "sources.none": "No sources yet.",
        "sources.page": "p. {page}",
        "sources.rider": "also given (cached)",
        "sources.ocr": "read by OCR, {confidence}% confidence",
        "sources.withheld": "This document is no longer open to you.",
        "sources.starts": "starts “{start}…”",
        "panel.heading": "This answer",
        "panel.none": "Ask a question to see how fast it was answered.",
        "panel.ttft": "Time to first token",
        "panel.total": "Total time",
        "panel.tps": "Tokens/s",
        "panel.decode": "Decoding",
        "panel.itl": "Inter-token latency",
        "panel.prompt": "Prompt tokens",
        "panel.cached": "Cached tokens",
        "panel.hit": "Cache hit",
        "panel.answer": "Answer tokens",
        "panel.retrieval": "Retrieval",
        "panel.chunks": "Chunks used",
        "panel.ordering": "Ordering",
        "panel.layout": "Prompt layout",
        "panel.predicted": "Predicted cached",
        "panel.verified": "Checked against sources",
        "card.title": "From the documents",
        "verify.unsupported": "No source sentence says this",
        "verify.facts": "Not found in the sources: {facts}",
        "verify.bad_marker": "There is no source [{n}] in this conversation",
        "verify.count": "supported: {ok} of {total} claims",
        "chart.heading": "This conversation",
        "chart.ttft": "TTFT (s)",
        "chart.hit": "cache hit %",
        "chart.turn": "turn",
        "chart.none": "The chart fills in as you ask.",
        "feedback.heading": "Was this answer helpful?",
        "feedback.comment": "Comment (optional)",
        "feedback.send": "Send feedback",
        "feedback.thanks": "Thank you for the feedback.",
        "feedback.first": "Rate an answer with 👍 or 👎 first.",
        "keys.heading": "API keys",
        "keys.intro": "For tools that speak the OpenAI API: base URL `{base}/v1`.",
        "keys.name": "Key name",
        "keys.create": "Create key",
        "keys.created": "Your new key (shown only now; copy it):",
        "keys.none": "No API keys yet.",
        "keys.revoked": "revoked",
        "keys.pick": "Key to revoke",
        "keys.revoke": "Revoke",
    },
    "ko": {
        "app.title": "사내 도움말 채팅",
        "login.title": "로그인",
        "login.intro": "회사 계정으로 로그인하세요.",
        "login.username": "사용자 이름",
        "login.password": "비밀번호",
        "login.submit": "로그인",
        "login.failed": "사용자 이름 또는 비밀번호가 올바르지 않습니다.",
        "login.locked": "로그인 실패가 너무 많습니다. {seconds}초 후에 다시 시도하세요.",
        "login.directory_down": "지금은 회사 디렉터리에 연결할 수 없습니다. "
        "잠시 후 다시 시도하거나 관리자에게 문의하세요.",
        "login.directory_refused": "회사 계정으로 이 어플라이언스를 사용할 수 없습니다 "
        "(허용된 그룹이 없거나 같은 이름의 로컬 계정이 있습니다). 관리자에게 문의하세요.",
        "login.oidc": "{provider}(으)로 로그인",
        "login.or": "또는 이 어플라이언스의 계정으로",
        "login.oidc_failed": "회사 계정 로그인을 완료하지 못했습니다. 다시 시작하세요.",
        "login.oidc_down": "지금은 회사 로그인 서비스에 연결할 수 없습니다. "
        "잠시 후 다시 시도하거나 이 어플라이언스의 계정을 사용하세요.",
        "login.expired": "세션이 만료되었습니다. 다시 로그인하세요.",
        "login.signed_out": "로그아웃되었습니다.",
        "logout.confirm": "이 브라우저에서 도움말 채팅을 로그아웃할까요?",
        "logout.back": "채팅으로 돌아가기",
        "password.heading": "비밀번호 변경",
        "password.note": "API 키는 계속 작동합니다. 다른 브라우저의 로그인은 종료되고, 이 "
        "브라우저는 로그인 상태로 유지됩니다.",
        "password.current": "현재 비밀번호",
        "password.new": "새 비밀번호 (8자 이상)",
        "password.submit": "비밀번호 변경",
        "password.changed": "비밀번호가 변경되었습니다. 로그아웃된 다른 세션: {count}개.",
        "password.wrong": "현재 비밀번호가 올바르지 않습니다.",
        "password.short": "새 비밀번호는 8자 이상이어야 합니다.",
        "password.same": "새 비밀번호는 현재 비밀번호와 달라야 합니다.",
        "nav.logout": "로그아웃",
        "nav.language": "언어",
        "conv.heading": "대화 목록",
        "chat.next": "다음 차례입니다. 진행 중인 답변이 끝나는 대로 시작합니다.",
        "chat.ahead_one": "앞에 질문 1개가 기다리고 있습니다. 그다음에 바로 시작합니다.",
        "chat.ahead": "앞에 질문 {n}개가 기다리고 있습니다. 차례가 되면 바로 시작합니다.",
        "conv.new": "새 대화",
        "conv.none": "아직 대화가 없습니다.",
        "conv.rename_label": "이름",
        "conv.rename": "이름 바꾸기",
        "conv.manage": "이름 바꾸기·삭제",
        "conv.delete": "삭제",
        "conv.deleted": "대화를 삭제했습니다.",
        "conv.untitled": "새 대화",
        "chat.label": "채팅",
        "chat.question": "질문",
        "chat.placeholder": "IT, 인사, 보안 규정에 대해 물어보세요… (Shift+Enter: 줄바꿈)",
        "chat.send": "보내기",
        "chat.stop": "중지",
        "chat.regenerate": "다시 생성",
        "chat.thinking": "…",
        "chat.stopped": "중지했습니다. 질문은 아래에 남아 있으니 보내기를 눌러 다시 물어보세요.",
        "chat.cut": "답변이 길이 제한에 걸려 잘렸습니다.",
        "chat.repeated": "답변이 같은 내용을 되풀이하기 시작해 그 자리에서 멈췄습니다.",
        "chat.continue": "이어서 생성",
        "chat.write_note": (
            "문서의 문장을 그대로 보여 드렸습니다. 모델이 이 문장들로 답변을 작성할 수 있습니다. "
            "시간이 더 걸리며, 작성한 내용은 문서와 대조해 확인합니다."
        ),
        "chat.write": "답변 작성",
        "error.busy": "답변 엔진이 지금 바쁩니다.",
        "error.unavailable": "답변 엔진에 지금 연결할 수 없습니다.",
        "error.yours": (
            "바쁩니다: 이미 처리 중인 질문이 {n}개 있습니다. 하나가 답변된 뒤 다시 시도하세요."
        ),
        "error.full": (
            "바쁩니다: 이미 질문 {n}개가 엔진을 기다리고 있습니다. 잠시 후 다시 시도하세요."
        ),
        "error.other": "질문에 답하지 못했습니다: {message}",
        "error.keep": (
            "질문은 아래에 남아 있습니다. 보내기를 눌러 다시 시도하세요. 잃은 것은 없습니다."
        ),
        "sources.heading": "출처",
        "sources.none": "아직 출처가 없습니다.",
        "sources.page": "{page}쪽",
        "sources.rider": "함께 제공됨(캐시)",
        "sources.ocr": "OCR로 읽음, 신뢰도 {confidence}%",
        "sources.withheld": "이 문서는 더 이상 열람할 수 없습니다.",
        "sources.starts": "시작: “{start}…”",
        "panel.heading": "이 답변",
        "panel.none": "질문하면 답변 속도가 여기에 표시됩니다.",
        "panel.ttft": "첫 토큰까지",
        "panel.total": "전체 시간",
        "panel.tps": "초당 토큰",
        "panel.decode": "디코딩",
        "panel.itl": "토큰 간 지연",
        "panel.prompt": "프롬프트 토큰",
        "panel.cached": "캐시된 토큰",
        "panel.hit": "캐시 적중",
        "panel.answer": "답변 토큰",
        "panel.retrieval": "검색",
        "panel.chunks": "사용한 청크",
        "panel.ordering": "정렬 방식",
        "panel.layout": "프롬프트 배치",
        "panel.predicted": "예측 캐시 토큰",
        "panel.verified": "출처 대조",
        "card.title": "문서 내용",
        "verify.unsupported": "이 내용을 말하는 출처 문장이 없음",
        "verify.facts": "출처에서 찾을 수 없음: {facts}",
        "verify.bad_marker": "이 대화에는 출처 [{n}]이(가) 없습니다",
        "verify.count": "근거 확인: 주장 {total}개 중 {ok}개",
        "chart.heading": "이 대화",
        "chart.ttft": "첫 토큰(초)",
        "chart.hit": "캐시 적중 %",
        "chart.turn": "차례",
        "chart.none": "질문할수록 차트가 채워집니다.",
        "feedback.heading": "이 답변이 도움이 되었나요?",
        "feedback.comment": "의견 (선택)",
        "feedback.send": "의견 보내기",
        "feedback.thanks": "의견 감사합니다.",
        "feedback.first": "먼저 👍 또는 👎로 답변을 평가하세요.",
        "keys.heading": "API 키",
        "keys.intro": "OpenAI API를 쓰는 도구용: 기본 URL `{base}/v1`.",
        "keys.name": "키 이름",
        "keys.create": "키 만들기",
        "keys.created": "새 키입니다 (지금만 보입니다. 복사해 두세요):",
        "keys.none": "아직 API 키가 없습니다.",
        "keys.revoked": "폐기됨",
        "keys.pick": "폐기할 키",
        "keys.revoke": "폐기",
    },
}


def t(lang: str, key: str, **values: object) -> str:
    """The text for ``key`` in ``lang`` (English when unknown), formatted with ``values``."""
    table = STRINGS.get(lang, STRINGS["en"])
    text = table.get(key) or STRINGS["en"][key]
    return text.format(**values) if values else text


def normalize(lang: str | None) -> str | None:
    """``"ko-KR"`` → ``"ko"``; None for a language the UI does not speak."""
    if not lang:
        return None
    base = lang.strip().lower().split("-")[0].split("_")[0]
    return base if base in LANGUAGES else None


def from_accept_language(header: str | None) -> str:
    """The first language of an ``Accept-Language`` header (by q-value) that the UI speaks;
    English when none is."""
    choices: list[tuple[float, int, str]] = []
    for i, part in enumerate((header or "").split(",")):
        tag, _, params = part.strip().partition(";")
        q = 1.0
        if params.strip().startswith("q="):
            try:
                q = float(params.strip()[2:])
            except ValueError:
                q = 0.0
        lang = normalize(tag)
        if lang and q > 0:
            choices.append((-q, i, lang))
    return min(choices)[2] if choices else "en"


def pick(explicit: str | None, accept_language: str | None) -> str:
    """An explicit, supported choice wins; else the browser's language."""
    return normalize(explicit) or from_accept_language(accept_language)
