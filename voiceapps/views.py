from core.errors import ErrorCode
from core.schema import operation, success_operation
from core.viewsets import ResourceViewSet
from virtual_numbers.selectors import number_access
from voiceapps import selectors, services
from voiceapps.serializers import VoiceAppInput, VoiceAppOutput

MENU_EXAMPLE = [
    {
        "gather": {
            "numDigits": 1,
            "say": {"text": "Press 1 for opening hours, 2 to hear this again."},
            "branches": {"1": [{"say": {"text": "We are open nine to five."}}]},
        }
    }
]
APP_EXAMPLE = {"script": MENU_EXAMPLE, "url": None, "updatedAt": 1795320000000}
DESCRIPTION = (
    "What answers the number's incoming calls instead of forwarding and voicemail: a `script` "
    "(a static flow such as a menu) or a `url` (each call POSTs `{callId, from, to, numberId}`, "
    "signed with your webhook's secret, and runs the script answered; docs/voice-apps.md). "
    "The blocklist applies first; when the application fails, the call falls back to the "
    "number's forwarding or voicemail."
)


class VoiceAppViewSet(ResourceViewSet):
    # `/api/numbers/:id/voice`: the number's voice application, its owner's only (404 for
    # anyone else). Actions are not named after HTTP methods (see webhooks.views).

    input_serializers = {"set": VoiceAppInput}
    lookup_url_kwarg = "number_id"  # the schema documents it as the UUID it is

    def number(self):
        return number_access(user=self.request.user, number_id=self.kwargs["number_id"])

    @operation(
        "numbers_voice_get",
        summary="Show what answers a number's calls",
        description=DESCRIPTION + " 404 when nothing does (forwarding and voicemail answer).",
        responses={200: (VoiceAppOutput, APP_EXAMPLE)},
        errors=[ErrorCode.NOT_FOUND],
    )
    def show(self, request, number_id):
        return self.answer(VoiceAppOutput, selectors.voice_app_access(number=self.number()))

    @operation(
        "numbers_voice_set",
        summary="Have a script or a URL answer a number's calls",
        description=DESCRIPTION + " Replaces what was set. 400 naming the path of every bad "
        "field of the script, or a URL that leads to a private or local address; "
        "destination_not_allowed for a `dial` target the dialing policy refuses or one of "
        "Relay's own numbers.",
        request=(VoiceAppInput, {"script": MENU_EXAMPLE}),
        responses={200: (VoiceAppOutput, APP_EXAMPLE)},
        errors=[ErrorCode.INVALID_REQUEST, ErrorCode.NOT_FOUND, ErrorCode.DESTINATION_NOT_ALLOWED],
    )
    def set(self, request, number_id):
        number = self.number()  # 404 before 400
        data = self.validated()
        app = services.voice_app_set(
            number=number, script=data.get("script"), url=data.get("url", "")
        )
        return self.answer(VoiceAppOutput, app)

    @success_operation(
        "numbers_voice_delete",
        summary="Give a number's calls back to forwarding and voicemail",
        errors=[ErrorCode.NOT_FOUND],
    )
    def remove(self, request, number_id):
        services.voice_app_delete(number=self.number())
        return self.succeeded()
