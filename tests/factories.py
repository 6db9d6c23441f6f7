import factory
from django.contrib.auth.hashers import make_password

from accounts.models import LoginSession, User

DEFAULT_PASSWORD = "correct-horse-battery-staple"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = User
        skip_postgeneration_save = True

    email = factory.Sequence(lambda n: f"user{n}@example.com")
    password = DEFAULT_PASSWORD

    @classmethod
    def _create(cls, model_class, *args, **kwargs):
        # Through the manager, so every user has a hashed password and an API key.
        return model_class.objects.create_user(*args, **kwargs)


class LoginSessionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LoginSession

    user = factory.SubFactory(UserFactory)


class InventoryNumberFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "numbers.InventoryNumber"

    e164 = factory.Sequence(lambda n: f"+4420794{60000 + n:05d}"[:13])


class NumberFactory(factory.django.DjangoModelFactory):
    """A held number whose PIN is 1234."""

    class Meta:
        model = "numbers.Number"

    owner = factory.SubFactory(UserFactory)
    inventory = factory.SubFactory(InventoryNumberFactory)
    number = factory.LazyAttribute(lambda o: o.inventory.e164)
    alias = factory.Sequence(lambda n: f"line {n}")
    pin_hash = factory.LazyFunction(lambda: make_password("1234"))


class CallRecordFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "history.CallRecord"

    number = factory.SubFactory(NumberFactory)
    owner = factory.LazyAttribute(lambda o: o.number.owner)
    caller_num = "+447700900123"
    status = "answered"
    duration = 45
